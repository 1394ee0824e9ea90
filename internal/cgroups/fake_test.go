package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodelet/nodelet/internal/machine"
)

// fakeKernel stands for the cgroup filesystems in a temporary directory:
// mkdir fills a new cgroup with its controllers' files, rmdir refuses a
// cgroup with children or processes.
type fakeKernel struct {
	t    *testing.T
	root string // the cgroup mount
	v2   bool
	// units is the fake systemd of the last Manager made with the
	// systemd driver.
	units *fakeUnits
}

// fakeUnits stands for systemd: it records the units asked for and makes
// their cgroups in the fake kernel as systemd would.
type fakeUnits struct {
	m     *Manager
	calls []string
	// fail, when set, is the error of every call.
	fail error
}

func (u *fakeUnits) Create(p string, rc *ResourceConfig) error {
	u.calls = append(u.calls, "create "+p)
	if u.fail != nil {
		return u.fail
	}
	return u.m.createFS(p, rc)
}

func (u *fakeUnits) Set(p string, rc *ResourceConfig) error {
	u.calls = append(u.calls, "set "+p)
	if u.fail != nil {
		return u.fail
	}
	return u.m.applyFS(p, rc)
}

func (u *fakeUnits) Destroy(p string) error {
	u.calls = append(u.calls, "destroy "+p)
	if u.fail != nil {
		return u.fail
	}
	for _, h := range u.m.hierarchies {
		if err := u.m.removeTree(filepath.Join(h, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return nil
}

const gi = int64(1) << 30
const mi = int64(1) << 20

// v1Hierarchies are the v1 mounts of the fake: cpu and cpuacct co-mounted
// (and symlinked), a named systemd hierarchy and a hybrid unified one.
var v1Hierarchies = []string{"cpu,cpuacct", "cpuset", "memory", "pids", "hugetlb", "systemd", "unified"}

func newFakeKernel(t *testing.T, v2 bool) *fakeKernel {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{t: t, root: root, v2: v2}
	if v2 {
		k.write("cgroup.controllers", "cpuset cpu io memory hugetlb pids")
		k.write("cgroup.subtree_control", "")
		k.write("cgroup.procs", "1")
		return k
	}
	for _, h := range v1Hierarchies {
		if err := os.Mkdir(filepath.Join(k.root, h), 0o755); err != nil {
			t.Fatal(err)
		}
		k.fill(filepath.Join(k.root, h), true)
	}
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(k.root, l)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func (k *fakeKernel) write(rel, v string) {
	k.t.Helper()
	if err := os.WriteFile(filepath.Join(k.root, rel), []byte(v), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

func (k *fakeKernel) read(rel string) string {
	k.t.Helper()
	data, err := os.ReadFile(filepath.Join(k.root, rel))
	if err != nil {
		k.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func (k *fakeKernel) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(k.root, rel))
	return err == nil
}

// fill writes the files of a v1 cgroup of hierarchy dir.
func (k *fakeKernel) fill(dir string, isRoot bool) {
	files := map[string]string{"cgroup.procs": ""}
	for _, c := range strings.Split(filepath.Base(k.hierarchyOf(dir)), ",") {
		switch c {
		case "cpu":
			files["cpu.shares"] = "1024"
			files["cpu.cfs_period_us"] = "100000"
			files["cpu.cfs_quota_us"] = "-1"
		case "cpuacct":
			files["cpuacct.usage"] = "0"
		case "cpuset":
			files["cpuset.cpus"], files["cpuset.mems"] = "", ""
			if isRoot {
				files["cpuset.cpus"], files["cpuset.mems"] = "0-1", "0"
			}
		case "memory":
			files["memory.limit_in_bytes"] = "9223372036854771712"
		case "pids":
			if !isRoot {
				files["pids.max"] = "max"
			}
		case "hugetlb":
			files["hugetlb.2MB.limit_in_bytes"] = "9223372036854771712"
			files["hugetlb.1GB.limit_in_bytes"] = "9223372036854771712"
		case "unified":
			files["cgroup.controllers"] = ""
		}
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			k.t.Fatal(err)
		}
	}
}

// hierarchyOf is the v1 hierarchy directory holding dir.
func (k *fakeKernel) hierarchyOf(dir string) string {
	rel, _ := filepath.Rel(k.root, dir)
	return filepath.Join(k.root, strings.Split(rel, string(filepath.Separator))[0])
}

func (k *fakeKernel) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if !k.v2 {
		k.fill(dir, false)
		return nil
	}
	enabled, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"))
	var ctrls []string
	files := map[string]string{"cgroup.procs": "", "cgroup.subtree_control": ""}
	for _, c := range strings.Fields(string(enabled)) {
		c = strings.TrimPrefix(c, "+")
		ctrls = append(ctrls, c)
		switch c {
		case "cpu":
			files["cpu.weight"], files["cpu.max"] = "100", "max 100000"
		case "memory":
			files["memory.max"] = "max"
		case "pids":
			files["pids.max"] = "max"
		case "hugetlb":
			files["hugetlb.2MB.max"], files["hugetlb.1GB.max"] = "max", "max"
		}
	}
	files["cgroup.controllers"] = strings.Join(ctrls, " ")
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (k *fakeKernel) rmdir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			return &os.PathError{Op: "rmdir", Path: dir, Err: syscall.EBUSY}
		}
	}
	if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); strings.TrimSpace(string(procs)) != "" {
		return &os.PathError{Op: "rmdir", Path: dir, Err: syscall.EBUSY}
	}
	return os.RemoveAll(dir)
}

// hierarchyDirs are the hierarchies a Manager should find in the fake.
func (k *fakeKernel) hierarchyDirs() []string {
	if k.v2 {
		return []string{""}
	}
	return v1Hierarchies
}

// facts is the machine of the fake: 2 CPUs, 4 GiB, 1000 pids, huge pages
// of 1 GiB and 2 MiB (none reserved), its cgroups as internal/machine
// finds them.
func (k *fakeKernel) facts() machine.Facts {
	return machine.Facts{
		NumCPU:         2,
		MemoryCapacity: 4 * gi,
		PIDMax:         1000,
		HugePages:      []machine.HugePages{{PageSize: gi}, {PageSize: 2 * mi}},
		Cgroups:        machine.ReadCgroups(k.root),
	}
}

// newManager makes a Manager on the fake's machine.
func newManager(t *testing.T, k *fakeKernel, mod func(*Config)) *Manager {
	t.Helper()
	cfg := Config{
		Driver:                 DriverCgroupfs,
		CgroupRoot:             "/",
		CgroupsPerQOS:          true,
		Machine:                k.facts(),
		EnforceNodeAllocatable: []string{"pods"},
		KubeReserved:           map[string]string{"memory": "100Mi", "cpu": "100m"},
		SystemReserved:         map[string]string{"memory": "50Mi"},
		mkdir:                  k.mkdir,
		rmdir:                  k.rmdir,
		newUnits:               func(m *Manager) units { k.units = &fakeUnits{m: m}; return k.units },
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
