package cgroups

import (
	"fmt"
	"path"

	occgroups "github.com/opencontainers/cgroups"
	ocmanager "github.com/opencontainers/cgroups/manager"
)

// units creates, limits and removes cgroups as systemd units: the systemd
// driver's half of the Manager. Paths are as the systemd driver spells them
// ("/kubepods.slice/kubepods-burstable.slice").
type units interface {
	// Create starts path's slice as a transient unit (its parent slices
	// implied) and gives it rc's limits, as unit properties and in the
	// cgroup's files.
	Create(path string, rc *ResourceConfig) error
	// Set gives path's unit rc's limits.
	Set(path string, rc *ResourceConfig) error
	// Destroy stops path's unit and removes its cgroup.
	Destroy(path string) error
}

// systemdUnits is units through libcontainer's systemd cgroup manager
// (github.com/opencontainers/cgroups), over the system bus, as the
// upstream kubelet's cgroup manager does: a unit's limits survive
// `systemctl daemon-reload`, which rewrites every unit's cgroup files from
// its properties.
type systemdUnits struct {
	v2 bool
	// pageSizes are the machine's huge page sizes, hugetlb whether the
	// hugetlb controller is there to limit them.
	pageSizes []int64
	hugetlb   bool
}

func (u *systemdUnits) manager(p string, rc *ResourceConfig) (occgroups.Manager, *occgroups.Resources, error) {
	c := systemdCgroup(p, Resources(rc, u.v2, u.pageSizes, u.hugetlb))
	mgr, err := ocmanager.New(c)
	if err != nil {
		return nil, nil, fmt.Errorf("systemd cgroup driver (unit %s): %w", c.Name, err)
	}
	return mgr, c.Resources, nil
}

func (u *systemdUnits) Create(p string, rc *ResourceConfig) error {
	mgr, res, err := u.manager(p, rc)
	if err != nil {
		return err
	}
	// Apply(-1) starts the unit without moving a process into it.
	if err := mgr.Apply(-1); err != nil {
		return fmt.Errorf("systemd cgroup driver: start unit %s over D-Bus: %w", path.Base(p), err)
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("systemd cgroup driver: set the limits of unit %s: %w", path.Base(p), err)
	}
	return nil
}

func (u *systemdUnits) Set(p string, rc *ResourceConfig) error {
	mgr, res, err := u.manager(p, rc)
	if err != nil {
		return err
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("systemd cgroup driver: set the limits of unit %s: %w", path.Base(p), err)
	}
	return nil
}

func (u *systemdUnits) Destroy(p string) error {
	mgr, _, err := u.manager(p, nil)
	if err != nil {
		return err
	}
	if err := mgr.Destroy(); err != nil {
		return fmt.Errorf("systemd cgroup driver: stop unit %s: %w", path.Base(p), err)
	}
	return nil
}

// systemdCgroup is libcontainer's description of the slice at p, as
// upstream's libctCgroupConfig: the last slice is the unit, the one above
// it its parent ("-.slice", the root slice, at the top).
func systemdCgroup(p string, res *occgroups.Resources) *occgroups.Cgroup {
	dir, base := path.Split(path.Clean(p))
	parent := "-.slice"
	if dir != "/" {
		parent = path.Base(dir)
	}
	return &occgroups.Cgroup{Systemd: true, Name: base, Parent: parent, Resources: res}
}

// Resources is rc as libcontainer's resources, as upstream's toResources:
// cpu weight (v2) or shares (v1), CFS quota and period, memory, pids and,
// when the hugetlb controller is there, a limit for every page size of the
// machine (0 for those rc does not name). Devices and the freezer are left
// alone.
func Resources(rc *ResourceConfig, v2 bool, pageSizes []int64, hugetlb bool) *occgroups.Resources {
	r := &occgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if rc == nil {
		return r
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		r.Memory = *rc.Memory
	}
	if rc.CPUShares != nil {
		if v2 {
			r.CpuWeight = uint64(CPUSharesToWeight(*rc.CPUShares))
		} else {
			r.CpuShares = uint64(*rc.CPUShares)
		}
	}
	if rc.CPUQuota != nil {
		r.CpuQuota = *rc.CPUQuota
		if r.CpuQuota <= 0 {
			r.CpuQuota = -1
		}
	}
	if rc.CPUPeriod != nil && *rc.CPUPeriod > 0 {
		r.CpuPeriod = uint64(*rc.CPUPeriod)
	}
	if rc.PidsLimit != nil {
		v := *rc.PidsLimit
		if v <= 0 {
			v = -1
		}
		r.PidsLimit = &v
	}
	if rc.HugePageLimit != nil && hugetlb {
		for _, size := range pageSizes {
			// math.MaxInt64 (no limit) as is, as upstream: the kernel caps it.
			r.HugetlbLimit = append(r.HugetlbLimit, &occgroups.HugepageLimit{Pagesize: byteSizeUnit(size), Limit: uint64(rc.HugePageLimit[size])})
		}
	}
	return r
}
