package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/machine"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func ctr(name string, req, lim v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podOf(uid string, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metavUID(uid),
		Spec:       v1.PodSpec{Containers: cs},
	}
}

func guaranteedPod(uid string) *v1.Pod {
	r := rl("cpu", "200m", "memory", "64Mi")
	return podOf(uid, ctr("c", r, r))
}

func burstablePod(uid string) *v1.Pod {
	return podOf(uid, ctr("c", rl("cpu", "100m", "memory", "32Mi"), nil))
}

func bestEffortPod(uid string) *v1.Pod {
	return podOf(uid, ctr("c", nil, nil))
}

func TestStart(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run("v2="+strconv.FormatBool(v2), func(t *testing.T) {
			k := newFakeKernel(t, v2)
			m := newManager(t, k, nil)
			if m.CgroupV2() != v2 {
				t.Fatalf("CgroupV2() = %v", m.CgroupV2())
			}
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, h := range k.hierarchyDirs() {
				for _, d := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
					if !k.exists(filepath.Join(h, d)) {
						t.Errorf("%s/%s missing", h, d)
					}
				}
			}
			// kubepods: 4Gi - 100Mi - 50Mi, 2 CPUs (reservation of cpu only
			// counts for shares: 1.9 CPUs), 1000 pids.
			wantMem := strconv.FormatInt(4*gi-150*mi, 10)
			if v2 {
				if got := k.read("cgroup.subtree_control"); got != "+cpu +cpuset +memory +pids +hugetlb +io" {
					t.Errorf("root subtree_control %q", got)
				}
				check(t, k, "kubepods/memory.max", wantMem)
				check(t, k, "kubepods/cpu.weight", strconv.FormatInt(CPUSharesToWeight(1945), 10))
				check(t, k, "kubepods/pids.max", "1000")
				check(t, k, "kubepods/besteffort/cpu.weight", "1")
				check(t, k, "kubepods/burstable/cpu.weight", "1")
				check(t, k, "kubepods/burstable/hugetlb.2MB.max", "max")
				check(t, k, "kubepods/hugetlb.2MB.max", "0")
				return
			}
			check(t, k, "memory/kubepods/memory.limit_in_bytes", wantMem)
			check(t, k, "cpu,cpuacct/kubepods/cpu.shares", "1945")
			check(t, k, "pids/kubepods/pids.max", "1000")
			check(t, k, "cpu,cpuacct/kubepods/besteffort/cpu.shares", "2")
			check(t, k, "cpu,cpuacct/kubepods/burstable/cpu.shares", "2")
			check(t, k, "cpuset/kubepods/burstable/cpuset.cpus", "0-1")
			check(t, k, "cpuset/kubepods/burstable/cpuset.mems", "0")
			check(t, k, "hugetlb/kubepods/burstable/hugetlb.1GB.limit_in_bytes", "-1")
			check(t, k, "hugetlb/kubepods/hugetlb.1GB.limit_in_bytes", "0")
			if k.exists("cpu/kubepods") != true || k.exists("cpuacct/kubepods") != true {
				t.Errorf("co-mounted hierarchy not shared")
			}
		})
	}
}

func check(t *testing.T, k *fakeKernel, rel, want string) {
	t.Helper()
	if got := k.read(rel); got != want {
		t.Errorf("%s = %q, want %q", rel, got, want)
	}
}

func TestStartErrors(t *testing.T) {
	k := newFakeKernel(t, false)
	if err := os.Remove(filepath.Join(k.root, "memory", "memory.limit_in_bytes")); err != nil {
		t.Fatal(err)
	}
	if err := newManager(t, k, nil).Start(context.Background()); err == nil {
		t.Error("Start without the memory controller: no error")
	}
	k = newFakeKernel(t, false)
	m := newManager(t, k, func(c *Config) { c.CgroupRoot = "/missing" })
	if err := m.Start(context.Background()); err == nil {
		t.Error("Start with a missing cgroupRoot: no error")
	}
	if _, err := New(Config{Machine: machine.Facts{Cgroups: machine.ReadCgroups(t.TempDir())}}); err == nil {
		t.Error("New with no hierarchy: no error")
	}
	if _, err := New(Config{Driver: "bogus", Machine: k.facts()}); err == nil {
		t.Error("New with a bad driver: no error")
	}
}

func TestNew(t *testing.T) {
	k := newFakeKernel(t, false)
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no hierarchy", Config: Config{Machine: machine.Facts{Cgroups: machine.ReadCgroups(t.TempDir())}}, WantErr: "no cgroup hierarchy"},
		{Name: "a bad driver", Config: Config{Driver: "bogus", Machine: k.facts()}, WantErr: "cgroupDriver must be"},
		{Name: "a nil clock is the real one", Config: Config{Machine: k.facts()}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
	})
}

func TestEnsurePod(t *testing.T) {
	over := func(p *v1.Pod, kv ...string) *v1.Pod { p.Spec.Overhead = rl(kv...); return p }
	withInit := func(p *v1.Pod, c v1.Container) *v1.Pod {
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		return p
	}
	tests := []struct {
		name   string
		pod    *v1.Pod
		mod    func(*Config)
		parent string
		// v1 files relative to the pod cgroup, by hierarchy.
		v1 map[string]string
		v2 map[string]string
	}{{
		name:   "guaranteed",
		pod:    guaranteedPod("g-1"),
		parent: "/kubepods/podg-1",
		v1: map[string]string{
			"cpu,cpuacct/cpu.shares": "204", "cpu,cpuacct/cpu.cfs_quota_us": "20000", "cpu,cpuacct/cpu.cfs_period_us": "100000",
			"memory/memory.limit_in_bytes": "67108864", "cpuset/cpuset.cpus": "0-1", "pids/pids.max": "max",
			"hugetlb/hugetlb.2MB.limit_in_bytes": "0", "hugetlb/hugetlb.1GB.limit_in_bytes": "0",
		},
		v2: map[string]string{"cpu.weight": "8", "cpu.max": "20000 100000", "memory.max": "67108864", "hugetlb.2MB.max": "0"},
	}, {
		name:   "guaranteed with overhead",
		pod:    over(guaranteedPod("g-2"), "cpu", "100m", "memory", "10Mi"),
		parent: "/kubepods/podg-2",
		v1: map[string]string{
			"cpu,cpuacct/cpu.shares": "307", "cpu,cpuacct/cpu.cfs_quota_us": "30000",
			"memory/memory.limit_in_bytes": strconv.FormatInt(74*mi, 10),
		},
		v2: map[string]string{"cpu.max": "30000 100000", "memory.max": strconv.FormatInt(74*mi, 10)},
	}, {
		name:   "burstable without limits",
		pod:    burstablePod("b-1"),
		parent: "/kubepods/burstable/podb-1",
		v1: map[string]string{
			"cpu,cpuacct/cpu.shares": "102", "cpu,cpuacct/cpu.cfs_quota_us": "-1",
			"memory/memory.limit_in_bytes": "9223372036854771712",
		},
		v2: map[string]string{"cpu.weight": "4", "cpu.max": "max 100000", "memory.max": "max"},
	}, {
		name: "burstable with every limit, two containers and a bigger init container",
		pod: withInit(podOf("b-2",
			ctr("a", rl("cpu", "100m", "memory", "10Mi"), rl("cpu", "300m", "memory", "20Mi")),
			ctr("b", rl("cpu", "100m", "memory", "10Mi"), rl("cpu", "200m", "memory", "30Mi"))),
			ctr("init", rl("cpu", "1", "memory", "10Mi"), rl("cpu", "1", "memory", "100Mi"))),
		parent: "/kubepods/burstable/podb-2",
		v1: map[string]string{
			"cpu,cpuacct/cpu.shares": "1024", "cpu,cpuacct/cpu.cfs_quota_us": "100000",
			"memory/memory.limit_in_bytes": strconv.FormatInt(100*mi, 10),
		},
		v2: map[string]string{"cpu.max": "100000 100000", "memory.max": strconv.FormatInt(100*mi, 10)},
	}, {
		name:   "burstable with one container without memory limit",
		pod:    podOf("b-3", ctr("a", nil, rl("cpu", "100m", "memory", "10Mi")), ctr("b", rl("cpu", "100m"), rl("cpu", "100m"))),
		parent: "/kubepods/burstable/podb-3",
		v1: map[string]string{
			"cpu,cpuacct/cpu.cfs_quota_us": "20000", "memory/memory.limit_in_bytes": "9223372036854771712",
		},
		v2: map[string]string{"cpu.max": "20000 100000", "memory.max": "max"},
	}, {
		name:   "besteffort",
		pod:    bestEffortPod("e-1"),
		parent: "/kubepods/besteffort/pode-1",
		v1:     map[string]string{"cpu,cpuacct/cpu.shares": "2", "cpu,cpuacct/cpu.cfs_quota_us": "-1"},
		v2:     map[string]string{"cpu.weight": "1", "cpu.max": "max 100000"},
	}, {
		name:   "hugepages requested",
		pod:    podOf("h-1", ctr("c", rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "8Mi"), rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "8Mi"))),
		parent: "/kubepods/podh-1",
		v1:     map[string]string{"hugetlb/hugetlb.2MB.limit_in_bytes": "8388608", "hugetlb/hugetlb.1GB.limit_in_bytes": "0"},
		v2:     map[string]string{"hugetlb.2MB.max": "8388608", "hugetlb.1GB.max": "0"},
	}, {
		name:   "podPidsLimit, cpuCFSQuotaPeriod 50ms",
		pod:    guaranteedPod("p-1"),
		mod:    func(c *Config) { c.PodPidsLimit = 100; c.CPUCFSQuotaPeriod = 50 * time.Millisecond },
		parent: "/kubepods/podp-1",
		v1:     map[string]string{"pids/pids.max": "100", "cpu,cpuacct/cpu.cfs_quota_us": "10000", "cpu,cpuacct/cpu.cfs_period_us": "50000"},
		v2:     map[string]string{"pids.max": "100", "cpu.max": "10000 50000"},
	}, {
		name:   "cpuCFSQuota false",
		pod:    guaranteedPod("q-1"),
		mod:    func(c *Config) { c.DisableCPUCFSQuota = true },
		parent: "/kubepods/podq-1",
		v1:     map[string]string{"cpu,cpuacct/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "67108864"},
		v2:     map[string]string{"cpu.max": "max 100000"},
	}, {
		name:   "cgroupRoot",
		pod:    bestEffortPod("r-1"),
		mod:    func(c *Config) { c.CgroupRoot = "/nodelet" },
		parent: "/nodelet/kubepods/besteffort/podr-1",
		v1:     map[string]string{"cpu,cpuacct/cpu.shares": "2"},
		v2:     map[string]string{"cpu.weight": "1"},
	}}
	for _, v2 := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(tt.name+"/v2="+strconv.FormatBool(v2), func(t *testing.T) {
				k := newFakeKernel(t, v2)
				if tt.name == "cgroupRoot" {
					for _, h := range k.hierarchyDirs() {
						if err := k.mkdir(filepath.Join(k.root, h, "nodelet")); err != nil {
							t.Fatal(err)
						}
					}
					if v2 {
						k.write("nodelet/cgroup.controllers", "cpuset cpu io memory hugetlb pids")
					}
				}
				m := newManager(t, k, tt.mod)
				if err := m.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				parent, err := m.EnsurePod(context.Background(), tt.pod)
				if err != nil {
					t.Fatal(err)
				}
				if parent != tt.parent {
					t.Errorf("parent %q, want %q", parent, tt.parent)
				}
				if v2 {
					for f, want := range tt.v2 {
						check(t, k, filepath.Join(parent, f), want)
					}
					return
				}
				for _, h := range k.hierarchyDirs() {
					if !k.exists(filepath.Join(h, parent)) {
						t.Errorf("no %s in %s", parent, h)
					}
				}
				for f, want := range tt.v1 {
					h, file := filepath.Split(f)
					check(t, k, filepath.Join(h, parent, file), want)
				}
			})
		}
	}
}

func TestEnsurePodIdempotentAndRecreated(t *testing.T) {
	k := newFakeKernel(t, false)
	m := newManager(t, k, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := guaranteedPod("x")
	if _, err := m.EnsurePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// A second call writes nothing.
	k.write("cpu,cpuacct/kubepods/podx/cpu.shares", "7")
	if _, err := m.EnsurePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	check(t, k, "cpu,cpuacct/kubepods/podx/cpu.shares", "7")
	// Gone from one hierarchy: made and configured again.
	if err := os.RemoveAll(filepath.Join(k.root, "memory/kubepods/podx")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsurePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	check(t, k, "memory/kubepods/podx/memory.limit_in_bytes", "67108864")
	check(t, k, "cpu,cpuacct/kubepods/podx/cpu.shares", "204")
}

func TestBurstableQoSShares(t *testing.T) {
	k := newFakeKernel(t, false)
	m := newManager(t, k, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	const qos = "cpu,cpuacct/kubepods/burstable/cpu.shares"
	if _, err := m.EnsurePod(context.Background(), burstablePod("b1")); err != nil {
		t.Fatal(err)
	}
	check(t, k, qos, "102")
	if _, err := m.EnsurePod(context.Background(), podOf("b2", ctr("c", rl("cpu", "500m"), nil))); err != nil {
		t.Fatal(err)
	}
	check(t, k, qos, "614")
	if err := m.RemovePod(context.Background(), "b1"); err != nil {
		t.Fatal(err)
	}
	check(t, k, qos, "512")
	if _, err := m.CleanupOrphans(context.Background(), func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	check(t, k, qos, "2")
}

func TestRemovePod(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run("v2="+strconv.FormatBool(v2), func(t *testing.T) {
			k := newFakeKernel(t, v2)
			m := newManager(t, k, nil)
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			parent, err := m.EnsurePod(context.Background(), burstablePod("r"))
			if err != nil {
				t.Fatal(err)
			}
			// The runtime's container cgroup below, with a process.
			h := k.hierarchyDirs()[len(k.hierarchyDirs())-1]
			child := filepath.Join(h, parent, "ctr1")
			if err := k.mkdir(filepath.Join(k.root, child)); err != nil {
				t.Fatal(err)
			}
			k.write(filepath.Join(child, "cgroup.procs"), "4242\n")
			err = m.RemovePod(context.Background(), "r")
			if !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("RemovePod of a busy cgroup: %v, want ErrNotEmpty", err)
			}
			for _, h := range k.hierarchyDirs() {
				if !k.exists(filepath.Join(h, parent)) {
					t.Fatalf("%s removed from %s although busy", parent, h)
				}
			}
			k.write(filepath.Join(child, "cgroup.procs"), "")
			if err := m.RemovePod(context.Background(), "r"); err != nil {
				t.Fatal(err)
			}
			for _, h := range k.hierarchyDirs() {
				if k.exists(filepath.Join(h, parent)) {
					t.Errorf("%s left in %s", parent, h)
				}
				if !k.exists(filepath.Join(h, "kubepods/burstable")) {
					t.Errorf("QoS cgroup removed from %s", h)
				}
			}
			if err := m.RemovePod(context.Background(), "r"); err != nil {
				t.Errorf("RemovePod of a removed pod: %v", err)
			}
		})
	}
}

func TestCleanupOrphans(t *testing.T) {
	for _, driver := range []string{DriverCgroupfs, DriverSystemd} {
		t.Run(driver, func(t *testing.T) {
			k := newFakeKernel(t, false)
			now := time.Now().Add(2 * OrphanGrace)
			m := newManager(t, k, func(c *Config) { c.Driver = driver; c.Clock = testingclock.NewFakePassiveClock(now) })
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			pods := map[string]*v1.Pod{
				"kept":  guaranteedPod("kept-1"),
				"gone":  burstablePod("gone-2"),
				"young": bestEffortPod("young-3"),
				"busy":  guaranteedPod("busy-4"),
			}
			parents := map[string]string{}
			for name, p := range pods {
				parent, err := m.EnsurePod(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				parents[name] = parent
			}
			young := filepath.Join(k.root, "memory", parents["young"])
			if err := os.Chtimes(young, now, now); err != nil {
				t.Fatal(err)
			}
			k.write(filepath.Join("pids", parents["busy"], "cgroup.procs"), "77")
			removed, err := m.CleanupOrphans(context.Background(), func(uid types.UID) bool { return uid == "kept-1" })
			if err != nil {
				t.Fatal(err)
			}
			if len(removed) != 1 || removed[0] != "gone-2" {
				t.Errorf("removed %v, want [gone-2]", removed)
			}
			for name, parent := range parents {
				want := name != "gone"
				for _, h := range k.hierarchyDirs() {
					if got := k.exists(filepath.Join(h, parent)); got != want {
						t.Errorf("%s in %s exists=%v, want %v", parent, h, got, want)
					}
				}
			}
		})
	}
}

// The orphan sweep reads the tree at its first call, then only when cgroups
// may have been left (a pod it configured no longer kept, a failed
// RemovePod, a sweep that left some) or OrphanRescan after the last.
func TestOrphanSweepSchedule(t *testing.T) {
	ctx := context.Background()
	k := newFakeKernel(t, false)
	clk := testingclock.NewFakePassiveClock(time.Now().Add(2 * OrphanGrace))
	newM := func() *Manager {
		m := newManager(t, k, func(c *Config) { c.Clock = clk })
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Another agent's pod (or an earlier process's): this Manager never
	// configured it.
	other := newM()
	otherParent, err := other.EnsurePod(ctx, bestEffortPod("other-1"))
	if err != nil {
		t.Fatal(err)
	}
	m := newM()
	parent, err := m.EnsurePod(ctx, guaranteedPod("mine-2"))
	if err != nil {
		t.Fatal(err)
	}
	wanted := map[types.UID]bool{"other-1": true, "mine-2": true}
	keep := func(uid types.UID) bool { return wanted[uid] }
	sweep := func(step time.Duration) []types.UID {
		t.Helper()
		clk.SetTime(clk.Now().Add(step))
		removed, err := m.CleanupOrphans(ctx, keep)
		if err != nil {
			t.Fatal(err)
		}
		return removed
	}
	gone := func(parent string) bool {
		for _, h := range k.hierarchyDirs() {
			if k.exists(filepath.Join(h, parent)) {
				return false
			}
		}
		return true
	}
	if got := sweep(0); len(got) != 0 {
		t.Fatalf("first sweep removed %v, every pod is kept", got)
	}
	delete(wanted, "other-1")
	if got := sweep(2 * time.Second); len(got) != 0 || gone(otherParent) {
		t.Errorf("a sweep before OrphanRescan read the tree: removed %v", got)
	}
	if got := sweep(OrphanRescan); len(got) != 1 || got[0] != "other-1" || !gone(otherParent) {
		t.Errorf("the sweep OrphanRescan later removed %v, want [other-1]", got)
	}

	// A pod this Manager configured is no longer kept: swept at once.
	delete(wanted, "mine-2")
	if got := sweep(2 * time.Second); len(got) != 1 || got[0] != "mine-2" || !gone(parent) {
		t.Errorf("a configured pod no longer kept: removed %v, want [mine-2]", got)
	}

	// A failed RemovePod: swept at the next call, and at each one after
	// while the cgroup stays busy.
	parent, err = m.EnsurePod(ctx, burstablePod("busy-3"))
	if err != nil {
		t.Fatal(err)
	}
	wanted["busy-3"] = true
	sweep(0)
	procs := filepath.Join(k.hierarchyDirs()[0], parent, "cgroup.procs")
	k.write(procs, "77\n")
	if err := m.RemovePod(ctx, "busy-3"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("RemovePod of a busy cgroup: %v", err)
	}
	delete(wanted, "busy-3")
	for range 2 {
		if got := sweep(2 * time.Second); len(got) != 0 {
			t.Fatalf("a busy cgroup removed: %v", got)
		}
	}
	k.write(procs, "")
	if got := sweep(2 * time.Second); len(got) != 1 || got[0] != "busy-3" || !gone(parent) {
		t.Errorf("once empty, the cgroup RemovePod left: removed %v, want [busy-3]", got)
	}
}

func TestSystemdNames(t *testing.T) {
	k := newFakeKernel(t, false)
	m := newManager(t, k, func(c *Config) { c.Driver = DriverSystemd })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, h := range k.hierarchyDirs() {
		for _, d := range []string{"kubepods.slice", "kubepods.slice/kubepods-burstable.slice", "kubepods.slice/kubepods-besteffort.slice"} {
			if !k.exists(filepath.Join(h, d)) {
				t.Errorf("%s/%s missing", h, d)
			}
		}
	}
	uid := "8f7c2a4e-1b2c-4d5e-9f00-aabbccddeeff"
	tests := []struct {
		pod  *v1.Pod
		want string
	}{
		{guaranteedPod(uid), "/kubepods.slice/kubepods-pod8f7c2a4e_1b2c_4d5e_9f00_aabbccddeeff.slice"},
		{burstablePod(uid), "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8f7c2a4e_1b2c_4d5e_9f00_aabbccddeeff.slice"},
		{bestEffortPod(uid), "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8f7c2a4e_1b2c_4d5e_9f00_aabbccddeeff.slice"},
	}
	for _, tt := range tests {
		if got := m.Name(m.PodCgroupName(tt.pod)); got != tt.want {
			t.Errorf("Name = %q, want %q", got, tt.want)
		}
	}
	parent, err := m.EnsurePod(context.Background(), burstablePod(uid))
	if err != nil {
		t.Fatal(err)
	}
	check(t, k, filepath.Join("cpu,cpuacct", parent, "cpu.shares"), "102")
	if got := m.PodCgroupName(burstablePod(uid)).SystemdUnit(); got != "kubepods-burstable-pod8f7c2a4e_1b2c_4d5e_9f00_aabbccddeeff.slice" {
		t.Errorf("SystemdUnit = %q", got)
	}
	if err := m.RemovePod(context.Background(), types.UID(uid)); err != nil {
		t.Fatal(err)
	}
	if k.exists(filepath.Join("memory", parent)) {
		t.Error("systemd pod cgroup not removed")
	}
	if got := (CgroupName{}).ToSystemd(); got != "/" {
		t.Errorf("root ToSystemd = %q", got)
	}
	if got := ParseCgroupfsName("/a//b/"); len(got) != 2 || got.ToCgroupfs() != "/a/b" {
		t.Errorf("ParseCgroupfsName = %v", got)
	}
}

func TestWithoutCgroupsPerQOS(t *testing.T) {
	k := newFakeKernel(t, false)
	m := newManager(t, k, func(c *Config) { c.CgroupsPerQOS = false })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k.exists("memory/kubepods") {
		t.Error("kubepods created without cgroupsPerQOS")
	}
	if parent, err := m.EnsurePod(context.Background(), guaranteedPod("a")); err != nil || parent != "" {
		t.Errorf("EnsurePod = %q, %v; want the runtime's default", parent, err)
	}
	m = newManager(t, k, func(c *Config) { c.CgroupsPerQOS = false; c.CgroupRoot = "/custom" })
	if parent, err := m.EnsurePod(context.Background(), guaranteedPod("a")); err != nil || parent != "/custom" {
		t.Errorf("EnsurePod = %q, %v; want /custom", parent, err)
	}
	if err := m.RemovePod(context.Background(), "a"); err != nil {
		t.Error(err)
	}
}

func TestResourceOptions(t *testing.T) {
	k := newFakeKernel(t, true)
	m := newManager(t, k, func(c *Config) { c.CPUCFSQuotaPeriod = 10 * time.Millisecond })
	o := m.ResourceOptions()
	if o.MemoryCapacity != 4*gi || !o.CgroupV2 || o.CPUCFSQuotaPeriod != 10*time.Millisecond || len(o.HugePageSizes) != 2 ||
		o.SwapBehavior != "" || o.SwapControllerAvailable || o.SwapCapacity != 0 {
		t.Errorf("ResourceOptions = %+v", o)
	}
	// The swap settings: memorySwap.swapBehavior and the machine's swap.
	m = newManager(t, k, func(c *Config) {
		c.SwapBehavior = LimitedSwap
		c.Machine.Swap = machine.Swap{On: true, Capacity: gi, ControllerAvailable: true}
	})
	if o := m.ResourceOptions(); o.SwapBehavior != LimitedSwap || !o.SwapControllerAvailable || o.SwapCapacity != gi {
		t.Errorf("swap ResourceOptions = %+v", o)
	}
}

func TestCapacity(t *testing.T) {
	k := newFakeKernel(t, false)
	m := newManager(t, k, func(c *Config) {
		c.Machine.HugePages = []machine.HugePages{{PageSize: 2 * mi, Pages: 4}}
		c.Machine.MemoryCapacity = 2048 * 1024
	})
	c := m.capacity()
	if c.Memory().Value() != 2048*1024 || c.Cpu().Value() != 2 || c.Name(resourcePID, resource.DecimalSI).Value() != 1000 {
		t.Errorf("capacity %v", c)
	}
	if q := c["hugepages-2Mi"]; q.Value() != 8*mi {
		t.Errorf("hugepages-2Mi %s in %v", q.String(), c)
	}
	if m.ResourceOptions().MemoryCapacity != 2048*1024 || len(m.ResourceOptions().HugePageSizes) != 1 {
		t.Errorf("resource options %+v", m.ResourceOptions())
	}
	m = newManager(t, k, func(c *Config) { c.Machine.PIDMax = 0 })
	if _, ok := m.capacity()[resourcePID]; ok {
		t.Errorf("pid capacity without pid_max: %v", m.capacity())
	}
}

// kubeletCgroups: nodelet moves itself into it at start, in every
// hierarchy, making it when missing, with either driver (a cgroupfs path,
// as upstream's system containers).
func TestKubeletCgroups(t *testing.T) {
	for _, v2 := range []bool{true, false} {
		for _, driver := range []string{DriverCgroupfs, DriverSystemd} {
			t.Run(fmt.Sprintf("v2=%v/%s", v2, driver), func(t *testing.T) {
				k := newFakeKernel(t, v2)
				m := newManager(t, k, func(c *Config) { c.Driver, c.KubeletCgroups = driver, "/kubelet.slice" })
				if err := m.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				for _, h := range k.hierarchyDirs() {
					if got := k.read(filepath.Join(h, "kubelet.slice", "cgroup.procs")); got != strconv.Itoa(os.Getpid()) {
						t.Errorf("%s: cgroup.procs %q, want this process", h, got)
					}
				}
			})
		}
	}
}
