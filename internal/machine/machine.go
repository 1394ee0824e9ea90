package machine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config says where the machine's facts are read from. Empty fields are
// the real machine's.
type Config struct {
	// ProcRoot is procfs ("/proc"): meminfo, stat (btime), swaps,
	// self/{cgroup,uid_map} and sys/kernel/{pid_max,osrelease,random/boot_id}.
	ProcRoot string
	// SysRoot is sysfs ("/sys"): kernel/mm/hugepages and
	// class/dmi/id/product_uuid.
	SysRoot string
	// CgroupMount is where the cgroup hierarchies are mounted
	// ("/sys/fs/cgroup").
	CgroupMount string
	// HostRoot is the host's root filesystem ("/"): etc/machine-id,
	// var/lib/dbus/machine-id and etc/os-release.
	HostRoot string
	// RootDir is the kubelet's root directory ("/var/lib/kubelet"): the
	// ephemeral storage capacity is the size of its filesystem.
	RootDir string

	// numCPU is the CPU count; nil is runtime.NumCPU (the CPUs this
	// process may run on). Tests fake it.
	numCPU func() int
}

// Facts is what the machine is made of. Zero values are what could not be
// read (MemTotal excepted: Read fails without it).
type Facts struct {
	// NumCPU is the number of CPUs nodelet may run on: the cpu capacity.
	NumCPU int
	// MemoryCapacity is MemTotal in bytes: the memory capacity.
	MemoryCapacity int64
	// HugePages are the machine's huge page sizes, in the order of
	// kernel/mm/hugepages (1Gi before 2Mi), each with the pages reserved.
	HugePages []HugePages
	// PIDMax is kernel.pid_max: the pid capacity of the pods' cgroup.
	PIDMax int64
	// EphemeralStorage is the size in bytes of RootDir's filesystem.
	EphemeralStorage int64
	// Cgroups is how cgroups are mounted.
	Cgroups Cgroups
	// Swap is the machine's swap: on or off, its size, the swap
	// controller, tmpfs's noswap.
	Swap Swap

	// MachineID is /etc/machine-id (else /var/lib/dbus/machine-id).
	MachineID string
	// SystemUUID is the DMI product UUID in lower case, else MachineID.
	SystemUUID string
	// BootID is kernel.random.boot_id.
	BootID string
	// BootTime is when the machine booted (btime of /proc/stat).
	BootTime time.Time
	// KernelVersion is kernel.osrelease.
	KernelVersion string
	// OSImage is PRETTY_NAME of /etc/os-release, else "Linux".
	OSImage string
}

// HugePages is one huge page size of the machine.
type HugePages struct {
	// PageSize is the size of a page in bytes.
	PageSize int64
	// Pages is nr_hugepages: the pages reserved.
	Pages int64
}

// Read reads the machine's facts from the roots of cfg (the real ones by
// default). Only an invalid cfg or an unreadable MemTotal is an error:
// what else cannot be read is left zero, for the consumer that needs it to
// refuse (cm without a cgroup hierarchy).
func Read(cfg Config) (Facts, error) {
	if err := cfg.defaults(); err != nil {
		return Facts{}, err
	}
	mem, err := memTotal(filepath.Join(cfg.ProcRoot, "meminfo"))
	if err != nil {
		return Facts{}, fmt.Errorf("machine memory: %w", err)
	}
	f := Facts{
		NumCPU:         cfg.numCPU(),
		MemoryCapacity: mem,
		HugePages:      readHugePages(filepath.Join(cfg.SysRoot, "kernel/mm/hugepages")),
		Cgroups:        ReadCgroups(cfg.CgroupMount),
		MachineID:      readTrim(filepath.Join(cfg.HostRoot, "etc/machine-id"), filepath.Join(cfg.HostRoot, "var/lib/dbus/machine-id")),
		SystemUUID:     strings.ToLower(readTrim(filepath.Join(cfg.SysRoot, "class/dmi/id/product_uuid"))),
		BootID:         readTrim(filepath.Join(cfg.ProcRoot, "sys/kernel/random/boot_id")),
		KernelVersion:  readTrim(filepath.Join(cfg.ProcRoot, "sys/kernel/osrelease")),
		OSImage:        osImage(filepath.Join(cfg.HostRoot, "etc/os-release")),
	}
	if v, err := strconv.ParseInt(readTrim(filepath.Join(cfg.ProcRoot, "sys/kernel/pid_max")), 10, 64); err == nil {
		f.PIDMax = v
	}
	f.Swap = readSwap(cfg.ProcRoot, f.Cgroups)
	if f.SystemUUID == "" {
		f.SystemUUID = f.MachineID
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(cfg.RootDir, &st); err == nil {
		f.EphemeralStorage = int64(st.Blocks) * st.Bsize
	}
	if bt, err := readBootTime(filepath.Join(cfg.ProcRoot, "stat")); err == nil {
		f.BootTime = bt
	}
	return f, nil
}

// defaults fills the empty roots with the real machine's and checks that
// the roots are absolute.
func (cfg *Config) defaults() error {
	for _, r := range []struct {
		name string
		p    *string
		def  string
	}{
		{"ProcRoot", &cfg.ProcRoot, "/proc"},
		{"SysRoot", &cfg.SysRoot, "/sys"},
		{"CgroupMount", &cfg.CgroupMount, "/sys/fs/cgroup"},
		{"HostRoot", &cfg.HostRoot, "/"},
	} {
		if *r.p == "" {
			*r.p = r.def
		}
		if !filepath.IsAbs(*r.p) {
			return fmt.Errorf("machine: %s %q is not an absolute path", r.name, *r.p)
		}
	}
	if cfg.RootDir == "" {
		cfg.RootDir = "/var/lib/kubelet"
	}
	if cfg.numCPU == nil {
		cfg.numCPU = runtime.NumCPU
	}
	return nil
}

// memTotal is MemTotal of a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", path, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}

// readHugePages lists the page sizes of dir (kernel/mm/hugepages: one
// hugepages-<n>kB directory per size) with their nr_hugepages; a size
// whose count cannot be read has 0 pages.
func readHugePages(dir string) []HugePages {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []HugePages
	for _, e := range entries {
		size, ok := pageSize(e.Name())
		if !ok {
			continue
		}
		pages, _ := strconv.ParseInt(readTrim(filepath.Join(dir, e.Name(), "nr_hugepages")), 10, 64)
		out = append(out, HugePages{PageSize: size, Pages: pages})
	}
	return out
}

// pageSize is the page size in bytes of a hugepages-<n>kB directory.
func pageSize(name string) (int64, bool) {
	v, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	v, ok = strings.CutSuffix(v, "kB")
	if !ok {
		return 0, false
	}
	kb, err := strconv.ParseInt(v, 10, 64)
	if err != nil || kb <= 0 {
		return 0, false
	}
	return kb * 1024, true
}

// readBootTime is the btime of a /proc/stat file.
func readBootTime(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(n, 0), nil
		}
	}
	return time.Time{}, errors.New("no btime in " + path)
}

// osImage is PRETTY_NAME of an os-release file, "Linux" without one.
func osImage(path string) string {
	out := "Linux"
	if data, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				out = strings.Trim(v, `"`)
			}
		}
	}
	return out
}

// readTrim is the first of paths that holds something, trimmed.
func readTrim(paths ...string) string {
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			if s := strings.TrimSpace(string(data)); s != "" {
				return s
			}
		}
	}
	return ""
}
