package cgroups

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	occgroups "github.com/opencontainers/cgroups"
	"k8s.io/apimachinery/pkg/types"
)

// With the systemd driver every cgroup is a unit asked of systemd: the
// slices at Start, the pod's slice with its limits, its removal; a
// refusal fails the pod's cgroup, which is asked again next time.
func TestSystemdDriverUnits(t *testing.T) {
	k := newFakeKernel(t, true)
	m := newManager(t, k, func(c *Config) { c.Driver = DriverSystemd })
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create /kubepods.slice", "set /kubepods.slice",
		"create /kubepods.slice/kubepods-burstable.slice", "create /kubepods.slice/kubepods-besteffort.slice",
		"set /kubepods.slice/kubepods-burstable.slice",
	}
	if !reflect.DeepEqual(k.units.calls, want) {
		t.Errorf("Start asked systemd for\n%q\nwant\n%q", k.units.calls, want)
	}
	pod := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_1.slice"
	k.units.calls, k.units.fail = nil, errors.New("dbus: connection refused")
	if _, err := m.EnsurePod(ctx, burstablePod("u-1")); err == nil {
		t.Fatal("EnsurePod succeeded though systemd refused the unit")
	}
	k.units.fail = nil
	got, err := m.EnsurePod(ctx, burstablePod("u-1"))
	if err != nil || got != pod {
		t.Fatalf("EnsurePod = %q, %v; want %q", got, err, pod)
	}
	asked := 0
	for _, c := range k.units.calls {
		if c == "create "+pod {
			asked++
		}
	}
	if asked < 2 {
		t.Errorf("the refused unit was not asked for again: %q", k.units.calls)
	}
	check(t, k, pod[1:]+"/cpu.weight", "4")
	check(t, k, pod[1:]+"/memory.max", "max")
	limited := podOf("u-2", ctr("c", rl("cpu", "100m", "memory", "32Mi"), rl("cpu", "200m", "memory", "64Mi")))
	if _, err := m.EnsurePod(ctx, limited); err != nil {
		t.Fatal(err)
	}
	limitedPath := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_2.slice"
	check(t, k, limitedPath+"/memory.max", "67108864")
	check(t, k, limitedPath+"/cpu.max", "20000 100000")
	k.units.calls = nil
	if err := m.RemovePod(ctx, types.UID("u-1")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.units.calls, "destroy "+pod) || k.exists(pod[1:]) {
		t.Errorf("RemovePod: calls %q, cgroup left %v", k.units.calls, k.exists(pod[1:]))
	}
}

func TestSystemdCgroup(t *testing.T) {
	for _, tt := range []struct{ path, name, parent string }{
		{"/kubepods.slice", "kubepods.slice", "-.slice"},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu_1.slice", "kubepods-burstable-podu_1.slice", "kubepods-burstable.slice"},
		{"/system.slice", "system.slice", "-.slice"},
	} {
		c := systemdCgroup(tt.path, nil)
		if c.Name != tt.name || c.Parent != tt.parent || !c.Systemd {
			t.Errorf("systemdCgroup(%q) = name %q parent %q systemd %v, want %q %q", tt.path, c.Name, c.Parent, c.Systemd, tt.name, tt.parent)
		}
	}
}

func TestResources(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	sizes := []int64{2 * mi, gi}
	for _, tt := range []struct {
		name    string
		rc      *ResourceConfig
		v2      bool
		hugetlb bool
		want    occgroups.Resources
	}{
		{name: "nil", want: occgroups.Resources{}},
		{name: "v2 pod", v2: true, rc: &ResourceConfig{CPUShares: i(102), CPUQuota: i(20000), CPUPeriod: i(100000), Memory: i(64 * mi), PidsLimit: i(100)},
			want: occgroups.Resources{CpuWeight: 4, CpuQuota: 20000, CpuPeriod: 100000, Memory: 64 * mi, PidsLimit: i(100)}},
		{name: "v1 shares", rc: &ResourceConfig{CPUShares: i(1024)}, want: occgroups.Resources{CpuShares: 1024}},
		{name: "no quota, no pids limit", v2: true, rc: &ResourceConfig{CPUQuota: i(-1), PidsLimit: i(0)}, want: occgroups.Resources{CpuQuota: -1, PidsLimit: i(-1)}},
		{name: "huge pages without the controller", v2: true, rc: &ResourceConfig{HugePageLimit: map[int64]int64{2 * mi: 4 * mi}}},
		{name: "huge pages: named, the others 0", v2: true, hugetlb: true, rc: &ResourceConfig{HugePageLimit: map[int64]int64{2 * mi: 4 * mi}},
			want: occgroups.Resources{HugetlbLimit: []*occgroups.HugepageLimit{{Pagesize: "2MB", Limit: uint64(4 * mi)}, {Pagesize: "1GB", Limit: 0}}}},
		{name: "huge pages unbounded", v2: true, hugetlb: true, rc: &ResourceConfig{HugePageLimit: unboundedHugePages(sizes)},
			want: occgroups.Resources{HugetlbLimit: []*occgroups.HugepageLimit{{Pagesize: "2MB", Limit: uint64(math.MaxInt64)}, {Pagesize: "1GB", Limit: uint64(math.MaxInt64)}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.SkipDevices, tt.want.SkipFreezeOnSet = true, true
			if got := Resources(tt.rc, tt.v2, sizes, tt.hugetlb); !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Resources = %+v, want %+v", *got, tt.want)
			}
		})
	}
}
