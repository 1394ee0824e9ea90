package machine

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// writeFiles creates files (relative path -> content) under root; a name
// ending in / is a directory, "a -> b" a symlink.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(content, "-> "):
			err = os.Symlink(strings.TrimPrefix(content, "-> "), p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// roots is a fake machine: proc, sys, cgroup and host roots in a temporary
// directory, with the files given (by root) on top of a complete machine.
type roots struct{ proc, sys, cgroup, host map[string]string }

func (r roots) config(t *testing.T) Config {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ProcRoot:    filepath.Join(base, "proc"),
		SysRoot:     filepath.Join(base, "sys"),
		CgroupMount: filepath.Join(base, "cgroup"),
		HostRoot:    filepath.Join(base, "host"),
		RootDir:     base,
		numCPU:      func() int { return 3 },
	}
	for dir, files := range map[string]map[string]string{cfg.ProcRoot: r.proc, cfg.SysRoot: r.sys, cfg.CgroupMount: r.cgroup, cfg.HostRoot: r.host} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, files)
	}
	return cfg
}

var (
	fullProc = map[string]string{
		"meminfo":                   "MemTotal:        4000000 kB\nMemFree:         1000 kB\n",
		"stat":                      "cpu  1 2 3\nbtime 1700000000\n",
		"sys/kernel/pid_max":        "4194304\n",
		"sys/kernel/osrelease":      "6.1.0-test\n",
		"sys/kernel/random/boot_id": "b00t-1d\n",
	}
	fullSys = map[string]string{
		"kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "1\n",
		"kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "512\n",
		"class/dmi/id/product_uuid":                            "4C4C4544-0000-1111-2222-333344445555\n",
	}
	fullHost = map[string]string{
		"etc/machine-id": "0123456789abcdef\n",
		"etc/os-release": "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n",
	}
	cgroupV2 = map[string]string{"cgroup.controllers": "cpuset cpu io memory hugetlb pids\n", "cgroup.procs": "1\n"}
)

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func TestRead(t *testing.T) {
	full := Facts{
		NumCPU:         3,
		MemoryCapacity: 4000000 * 1024,
		HugePages:      []HugePages{{PageSize: gi, Pages: 1}, {PageSize: 2 * mi, Pages: 512}},
		PIDMax:         4194304,
		MachineID:      "0123456789abcdef",
		SystemUUID:     "4c4c4544-0000-1111-2222-333344445555",
		BootID:         "b00t-1d",
		BootTime:       time.Unix(1700000000, 0),
		KernelVersion:  "6.1.0-test",
		OSImage:        "Debian GNU/Linux 13 (trixie)",
	}
	tests := []struct {
		name    string
		roots   roots
		want    func(f *Facts)
		wantErr string
	}{{
		name:  "complete machine",
		roots: roots{proc: fullProc, sys: fullSys, cgroup: cgroupV2, host: fullHost},
	}, {
		name:  "no huge pages, no DMI, machine ID from dbus, no os-release, no pid_max, no btime",
		roots: roots{proc: with(fullProc, "sys/kernel/pid_max", "", "stat", "cpu 1\n"), sys: map[string]string{"kernel/mm/hugepages/": ""}, cgroup: cgroupV2, host: map[string]string{"var/lib/dbus/machine-id": "dbus-id\n"}},
		want: func(f *Facts) {
			f.HugePages, f.PIDMax, f.BootTime = nil, 0, time.Time{}
			f.MachineID, f.SystemUUID, f.OSImage = "dbus-id", "dbus-id", "Linux"
		},
	}, {
		name:  "an empty machine-id falls back to dbus's",
		roots: roots{proc: fullProc, sys: fullSys, cgroup: cgroupV2, host: with(fullHost, "etc/machine-id", "\n", "var/lib/dbus/machine-id", "dbus-id\n")},
		want:  func(f *Facts) { f.MachineID = "dbus-id" },
	}, {
		name: "a page size without nr_hugepages has 0 pages, other entries are ignored",
		roots: roots{proc: fullProc, cgroup: cgroupV2, host: fullHost, sys: map[string]string{
			"kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "x\n",
			"kernel/mm/hugepages/hugepages-64kB/":               "",
			"kernel/mm/hugepages/other/":                        "",
			"class/dmi/id/product_uuid":                         "ABC\n",
		}},
		want: func(f *Facts) {
			f.HugePages = []HugePages{{PageSize: 2 * mi}, {PageSize: 64 << 10}}
			f.SystemUUID = "abc"
		},
	}, {
		name:  "cgroup v1: no hierarchies is no error",
		roots: roots{proc: fullProc, sys: fullSys, host: fullHost},
		want:  func(f *Facts) { f.Cgroups.V2, f.Cgroups.Hierarchies = false, nil },
	}, {
		name: "swap on, with the controller in nodelet's cgroup, on a kernel with tmpfs noswap",
		roots: roots{proc: with(fullProc, "meminfo", "MemTotal:        4000000 kB\nSwapTotal:       1048572 kB\n",
			"swaps", "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n", "self/cgroup", "0::/nodelet.slice\n",
			"sys/kernel/osrelease", "6.12.0\n"),
			sys: fullSys, cgroup: with(cgroupV2, "nodelet.slice/memory.swap.max", "max\n"), host: fullHost},
		want: func(f *Facts) {
			f.KernelVersion = "6.12.0"
			f.Swap = Swap{On: true, Capacity: 1048572 * 1024, ControllerAvailable: true, TmpfsNoswap: true}
		},
	}, {
		name:    "no meminfo",
		roots:   roots{proc: with(fullProc, "meminfo", ""), sys: fullSys, cgroup: cgroupV2, host: fullHost},
		wantErr: "meminfo: no such file",
	}, {
		name:    "no MemTotal",
		roots:   roots{proc: with(fullProc, "meminfo", "MemFree: 1 kB\n"), sys: fullSys, cgroup: cgroupV2, host: fullHost},
		wantErr: "no MemTotal",
	}, {
		name:    "bad MemTotal",
		roots:   roots{proc: with(fullProc, "meminfo", "MemTotal: lots kB\n"), sys: fullSys, cgroup: cgroupV2, host: fullHost},
		wantErr: "invalid syntax",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.roots.config(t)
			got, err := Read(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := full
			want.Cgroups = Cgroups{Mount: cfg.CgroupMount, V2: true, Hierarchies: []string{cfg.CgroupMount}}
			if tt.want != nil {
				tt.want(&want)
			}
			if got.EphemeralStorage <= 0 {
				t.Errorf("EphemeralStorage = %d, want the size of %s", got.EphemeralStorage, cfg.RootDir)
			}
			got.EphemeralStorage = 0
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestReadConfig(t *testing.T) {
	if _, err := Read(Config{ProcRoot: "proc"}); err == nil || !strings.Contains(err.Error(), "ProcRoot") {
		t.Errorf("relative ProcRoot: err = %v", err)
	}
	if _, err := Read(Config{CgroupMount: "sys/fs/cgroup"}); err == nil || !strings.Contains(err.Error(), "CgroupMount") {
		t.Errorf("relative CgroupMount: err = %v", err)
	}
	cfg := Config{}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	if cfg.ProcRoot != "/proc" || cfg.SysRoot != "/sys" || cfg.CgroupMount != "/sys/fs/cgroup" || cfg.HostRoot != "/" || cfg.RootDir != "/var/lib/kubelet" || cfg.numCPU() != runtime.NumCPU() {
		t.Errorf("defaults = %+v", cfg)
	}
	// A missing root directory leaves the ephemeral storage unknown.
	r := roots{proc: fullProc, sys: fullSys, cgroup: cgroupV2, host: fullHost}
	cfg = r.config(t)
	cfg.RootDir = filepath.Join(cfg.RootDir, "missing")
	if f, err := Read(cfg); err != nil || f.EphemeralStorage != 0 {
		t.Errorf("EphemeralStorage = %d, %v; want 0", f.EphemeralStorage, err)
	}
}

func TestReadCgroups(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		v2    bool
		// hierarchies relative to the mount ("." is the mount).
		hierarchies []string
	}{{
		name:        "v2",
		files:       cgroupV2,
		v2:          true,
		hierarchies: []string{"."},
	}, {
		name: "v1 with co-mounts, a named hierarchy and a hybrid unified one",
		files: map[string]string{
			"cpu,cpuacct/cgroup.procs": "", "cpu": "-> cpu,cpuacct", "cpuacct": "-> cpu,cpuacct",
			"memory/cgroup.procs": "", "pids/cgroup.procs": "", "systemd/cgroup.procs": "",
			"unified/cgroup.procs": "", "unified/cgroup.controllers": "",
			"not-mounted/": "", "dangling": "-> nowhere",
		},
		hierarchies: []string{"cpu,cpuacct", "memory", "pids", "systemd", "unified"},
	}, {
		name:  "nothing mounted",
		files: map[string]string{"x/": ""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mount, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, mount, tt.files)
			got := ReadCgroups(mount)
			var want []string
			for _, h := range tt.hierarchies {
				want = append(want, filepath.Join(mount, h))
			}
			if got.Mount != mount || got.V2 != tt.v2 || !reflect.DeepEqual(got.Hierarchies, want) {
				t.Errorf("got %+v, want v2=%v hierarchies %v", got, tt.v2, want)
			}
			if v := got.Version(); (v == "v2") != tt.v2 {
				t.Errorf("Version() = %q", v)
			}
		})
	}
	if got := ReadCgroups(filepath.Join(t.TempDir(), "missing")); got.V2 || got.Hierarchies != nil {
		t.Errorf("missing mount: %+v", got)
	}
}

func TestReadThisMachine(t *testing.T) {
	f, err := Read(Config{RootDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if f.NumCPU != runtime.NumCPU() || f.MemoryCapacity <= 0 || f.EphemeralStorage <= 0 || f.Cgroups.Mount != "/sys/fs/cgroup" || f.OSImage == "" {
		t.Errorf("facts %+v", f)
	}
}
