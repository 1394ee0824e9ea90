package stats

import (
	"strings"
	"testing"

	"github.com/nodelet/nodelet/internal/machine"
)

func TestWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		name                string
		usage, inactiveFile uint64
		want                uint64
	}{
		{"no inactive file", 1000, 0, 1000},
		{"some inactive file", 1000, 300, 700},
		{"inactive equals usage", 1000, 1000, 0},
		{"inactive above usage is clamped", 1000, 5000, 0},
		{"zero", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workingSet(tc.usage, tc.inactiveFile); got != tc.want {
				t.Errorf("workingSet(%d, %d) = %d, want %d", tc.usage, tc.inactiveFile, got, tc.want)
			}
		})
	}
}

func TestReadRootCgroup(t *testing.T) {
	proc := procFixture(t) // MemTotal 1000000 kB, MemFree 400000 kB
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    cgroupSample
		wantErr bool
	}{
		{
			name: "v1 cpuacct and memory",
			files: map[string]string{
				"cpuacct/cpuacct.usage":        "123456789\n",
				"memory/memory.usage_in_bytes": "1000\n",
				"memory/memory.stat":           "inactive_file 1\nrss 2\ntotal_inactive_file 300\ntotal_rss 400\ntotal_pgfault 50\ntotal_pgmajfault 5\n",
			},
			want: cgroupSample{hasCPU: true, cpuNanos: 123456789, hasMemory: true, usage: 1000, workingSet: 700, rss: 400, pgfault: 50, pgmajfault: 5},
		},
		{
			name: "v1 combined cpu,cpuacct mount",
			files: map[string]string{
				"cpu,cpuacct/cpuacct.usage":    "42\n",
				"memory/memory.usage_in_bytes": "10\n",
				"memory/memory.stat":           "total_inactive_file 50\n",
			},
			want: cgroupSample{hasCPU: true, cpuNanos: 42, hasMemory: true, usage: 10, workingSet: 0},
		},
		{
			name: "v1 without memory hierarchy",
			files: map[string]string{
				"cpuacct/cpuacct.usage": "42\n",
			},
			want:    cgroupSample{hasCPU: true, cpuNanos: 42},
			wantErr: true,
		},
		{
			name: "v1 malformed cpuacct.usage",
			files: map[string]string{
				"cpuacct/cpuacct.usage":        "x\n",
				"memory/memory.usage_in_bytes": "10\n",
				"memory/memory.stat":           "",
			},
			want:    cgroupSample{hasMemory: true, usage: 10, workingSet: 10},
			wantErr: true,
		},
		{
			name: "v2 root without memory.current uses meminfo",
			files: map[string]string{
				"cgroup.controllers": "cpu memory io\n",
				"cpu.stat":           "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
				"memory.stat":        "anon 4096\nfile 8192\ninactive_file 100000000\npgfault 9\npgmajfault 1\n",
			},
			// usage = (1000000-400000) kB
			want: cgroupSample{hasCPU: true, cpuNanos: 2500000, hasMemory: true, usage: 614400000, workingSet: 514400000, rss: 4096, pgfault: 9, pgmajfault: 1},
		},
		{
			name: "v2 with memory.current",
			files: map[string]string{
				"cgroup.controllers": "cpu memory\n",
				"cpu.stat":           "usage_usec 1\n",
				"memory.current":     "5000\n",
				"memory.stat":        "anon 10\ninactive_file 1000\n",
			},
			want: cgroupSample{hasCPU: true, cpuNanos: 1000, hasMemory: true, usage: 5000, workingSet: 4000, rss: 10},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			got, err := readRootCgroup(machine.ReadCgroups(root), 1000000*1024, proc)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseNetDev(t *testing.T) {
	got, err := parseNetDev(strings.NewReader(netDevFixture))
	if err != nil {
		t.Fatal(err)
	}
	want := []ifaceCounters{
		{name: "lo", rxBytes: 449973842, txBytes: 449973842},
		{name: "eth0", rxBytes: 346607367, rxErrors: 3, txBytes: 1663874, txErrors: 4},
		{name: "veth7d59e0f4", rxBytes: 1000, txBytes: 2000},
		{name: "nodelet0", rxBytes: 43042, txBytes: 43730},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d interfaces %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("interface %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	if _, err := parseNetDev(strings.NewReader("h1\nh2\n  eth0: 1 2 3\n")); err == nil {
		t.Error("a short line must be an error")
	}
}

func TestIgnoredInterface(t *testing.T) {
	for name, want := range map[string]bool{
		"lo": true, "veth123": true, "docker0": true, "nerdctl0": true,
		"eth0": false, "nodelet0": false, "ens3": false, "cni0": false,
	} {
		if got := ignoredInterface(name); got != want {
			t.Errorf("ignoredInterface(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestReadRootCgroupWithoutMount(t *testing.T) {
	if _, err := readRootCgroup(machine.Cgroups{}, 1, procFixture(t)); err == nil {
		t.Error("no cgroup mount: no error")
	}
}

func TestReadMeminfo(t *testing.T) {
	mi, err := readMeminfo(procFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if mi["MemTotal"] != 1000000*1024 || mi["SwapFree"] != 150000*1024 {
		t.Errorf("meminfo = %v", mi)
	}
	if _, err := readMeminfo(t.TempDir()); err == nil {
		t.Error("missing meminfo must be an error")
	}
}

func TestReadRlimit(t *testing.T) {
	proc := procFixture(t)
	r := readRlimit(proc)
	// min(pid_max 4194304, threads-max 63000)
	if !r.hasMaxPID || r.maxPID != 63000 || !r.hasProcs || r.procs != 250 {
		t.Errorf("rlimit = %+v, want maxPID 63000, procs 250", r)
	}
	if r := readRlimit(t.TempDir()); r.hasMaxPID || r.hasProcs {
		t.Errorf("empty proc: rlimit = %+v", r)
	}
}

func TestReadPodsMemory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		cgroup  string
		want    podsMemory
		wantErr bool
	}{
		{"v1 with a limit", map[string]string{
			"memory/kubepods/memory.usage_in_bytes": "1000\n",
			"memory/kubepods/memory.stat":           "inactive_file 1\ntotal_inactive_file 300\n",
			"memory/kubepods/memory.limit_in_bytes": "5000\n",
		}, "/kubepods", podsMemory{usage: 1000, workingSet: 700, limit: 5000}, false},
		{"v1 without a limit (systemd's name)", map[string]string{
			"memory/kubepods.slice/memory.usage_in_bytes": "1000\n",
			"memory/kubepods.slice/memory.stat":           "total_inactive_file 0\n",
			"memory/kubepods.slice/memory.limit_in_bytes": "9223372036854771712\n",
		}, "/kubepods.slice", podsMemory{usage: 1000, workingSet: 1000}, false},
		{"v2", map[string]string{
			"cgroup.controllers":      "cpu memory\n",
			"kubepods/memory.current": "5000\n",
			"kubepods/memory.stat":    "inactive_file 1000\n",
			"kubepods/memory.max":     "8000\n",
		}, "/kubepods", podsMemory{usage: 5000, workingSet: 4000, limit: 8000}, false},
		{"v2 max", map[string]string{
			"cgroup.controllers":      "cpu memory\n",
			"kubepods/memory.current": "5000\n",
			"kubepods/memory.stat":    "inactive_file 1000\n",
			"kubepods/memory.max":     "max\n",
		}, "/kubepods", podsMemory{usage: 5000, workingSet: 4000}, false},
		{"no cgroup", map[string]string{"memory/memory.usage_in_bytes": "1\n"}, "/kubepods", podsMemory{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			got, err := readPodsMemory(machine.ReadCgroups(root), tc.cgroup)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
