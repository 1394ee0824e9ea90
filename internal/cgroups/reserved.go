package cgroups

import (
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The values of enforceNodeAllocatable (--enforce-node-allocatable), as
// upstream.
const (
	EnforcePods                       = "pods"
	EnforceSystemReserved             = "system-reserved"
	EnforceSystemReservedCompressible = "system-reserved-compressible"
	EnforceKubeReserved               = "kube-reserved"
	EnforceKubeReservedCompressible   = "kube-reserved-compressible"
	EnforceNone                       = "none"
)

// Event reasons of node allocatable enforcement, as upstream.
const (
	ReasonNodeAllocatableEnforced          = "NodeAllocatableEnforced"
	ReasonFailedNodeAllocatableEnforcement = "FailedNodeAllocatableEnforcement"
)

// ReservedConfig is the cgroup configuration a reservation enforces on
// its cgroup (upstream's getCgroupConfigInternal): cpu shares from cpu
// and, unless compressibleOnly, the memory limit, pids.max from pid and
// the hugetlb limits. Nil for no reservation.
func ReservedConfig(reserved map[string]string, compressibleOnly bool) (*ResourceConfig, error) {
	if reserved == nil {
		return nil, nil
	}
	rl := v1.ResourceList{}
	for k, v := range reserved {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("reserved %s=%q: %w", k, v, err)
		}
		rl[v1.ResourceName(k)] = q
	}
	rc := &ResourceConfig{}
	if q, ok := rl[v1.ResourceCPU]; ok {
		v := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &v
	}
	if compressibleOnly {
		return rc, nil
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		v := q.Value()
		rc.Memory = &v
	}
	if q, ok := rl[resourcePID]; ok {
		v := q.Value()
		rc.PidsLimit = &v
	}
	rc.HugePageLimit = HugePageLimits(rl)
	return rc, nil
}

// reservation is one of the reserved cgroups enforceNodeAllocatable names.
type reservation struct {
	key          string // EnforceSystemReserved...
	what         string // "System Reserved", "Kube Reserved"
	cgroup       string // as configured
	reserved     map[string]string
	compressible bool
}

// reservations are the reserved cgroups to enforce, system's first, as
// upstream.
func (m *Manager) reservations() []reservation {
	var out []reservation
	for _, r := range []reservation{
		{key: EnforceSystemReserved, what: "System Reserved", cgroup: m.cfg.SystemReservedCgroup, reserved: m.cfg.SystemReserved},
		{key: EnforceKubeReserved, what: "Kube Reserved", cgroup: m.cfg.KubeReservedCgroup, reserved: m.cfg.KubeReserved},
		{key: EnforceSystemReservedCompressible, what: "System Reserved Compressible", cgroup: m.cfg.SystemReservedCgroup, reserved: m.cfg.SystemReserved, compressible: true},
		{key: EnforceKubeReservedCompressible, what: "Kube Reserved Compressible", cgroup: m.cfg.KubeReservedCgroup, reserved: m.cfg.KubeReserved, compressible: true},
	} {
		for _, k := range m.cfg.EnforceNodeAllocatable {
			if k == r.key {
				out = append(out, r)
			}
		}
	}
	return out
}

// parseName reads a configured cgroup name (kubeReservedCgroup,
// systemReservedCgroup) as the driver spells it: a cgroupfs path, or with
// the systemd driver a slice path whose last slice names every level
// ("/kube.slice/kube-reserved.slice" is {"kube", "reserved"}).
func (m *Manager) parseName(s string) CgroupName {
	if m.cfg.Driver != DriverSystemd || !strings.HasSuffix(s, ".slice") {
		return ParseCgroupfsName(s)
	}
	last := strings.TrimSuffix(filepath.Base(s), ".slice")
	var out CgroupName
	for _, p := range strings.Split(last, "-") {
		out = append(out, strings.ReplaceAll(p, "_", "-"))
	}
	return out
}

// enforceReserved writes the reservation's limits into its cgroup, which
// must exist in every hierarchy (nodelet does not create it: the system's
// daemons are put there by whoever runs them).
func (m *Manager) enforceReserved(r reservation) error {
	rc, err := ReservedConfig(r.reserved, r.compressible)
	if err != nil {
		return err
	}
	n := m.parseName(r.cgroup)
	if rc == nil {
		return fmt.Errorf("%q cgroup is not configured properly", n.ToCgroupfs())
	}
	var missing []string
	for _, h := range m.hierarchies {
		if dir := m.dir(h, n); !exists(dir) {
			missing = append(missing, dir)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup %q has some missing paths: %v", m.Name(n), strings.Join(missing, ", "))
	}
	return m.apply(n, rc)
}
