package machine

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity is the machine's cpu, memory and hugepages-<size> (pages
// reserved × page size, one per page size, 0 included), as upstream's
// CapacityFromMachineInfo. The Node adds pods and ephemeral-storage, the
// pods' cgroup pid.
func (f Facts) Capacity() v1.ResourceList {
	out := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(f.NumCPU), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(f.MemoryCapacity, resource.BinarySI),
	}
	for _, hp := range f.HugePages {
		out[HugePageResourceName(hp.PageSize)] = *resource.NewQuantity(hp.Pages*hp.PageSize, resource.BinarySI)
	}
	return out
}

// HugePageResourceName is the resource of a page size in bytes:
// hugepages-2Mi, hugepages-1Gi.
func HugePageResourceName(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}

// Allocatable is capacity minus kubeReserved, systemReserved and the hard
// eviction thresholds (Reservation), as upstream computes it: the
// reservations of a resource are summed, then subtracted, never below
// zero. A reservation of a resource capacity lacks is ignored; one that
// does not parse is an error.
func Allocatable(capacity v1.ResourceList, kubeReserved, systemReserved, evictionHard map[string]string) (v1.ResourceList, error) {
	reserved, err := Reservation(capacity, kubeReserved, systemReserved, evictionHard)
	if err != nil {
		return nil, err
	}
	out := v1.ResourceList{}
	for name, c := range capacity {
		a := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			a.Sub(r)
		}
		if a.Sign() < 0 {
			a = *resource.NewQuantity(0, c.Format)
		}
		out[name] = a
	}
	return out, nil
}

// Reservation is upstream's node allocatable reservation
// (GetNodeAllocatableReservation): kubeReserved + systemReserved + the
// hard eviction thresholds (memory.available added to memory,
// nodefs.available to ephemeral-storage; a quantity or a percentage of
// capacity), per resource. The memory manager's reservedMemory must add up
// to its memory.
func Reservation(capacity v1.ResourceList, kubeReserved, systemReserved, evictionHard map[string]string) (v1.ResourceList, error) {
	reserved := v1.ResourceList{}
	add := func(name v1.ResourceName, q resource.Quantity) {
		if cur, ok := reserved[name]; ok {
			cur.Add(q)
			reserved[name] = cur
			return
		}
		reserved[name] = q.DeepCopy()
	}
	for _, m := range []map[string]string{kubeReserved, systemReserved} {
		for k, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("reserved %s=%q: %w", k, v, err)
			}
			add(v1.ResourceName(k), q)
		}
	}
	for signal, res := range map[string]v1.ResourceName{"memory.available": v1.ResourceMemory, "nodefs.available": v1.ResourceEphemeralStorage} {
		v, ok := evictionHard[signal]
		if !ok {
			continue
		}
		q, err := threshold(v, capacity[res])
		if err != nil {
			return nil, fmt.Errorf("evictionHard %s=%q: %w", signal, v, err)
		}
		add(res, q)
	}
	return reserved, nil
}

// threshold parses an eviction threshold: a quantity or a percentage of
// capacity.
func threshold(v string, capacity resource.Quantity) (resource.Quantity, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil || pct < 0 || pct > 100 {
			return resource.Quantity{}, fmt.Errorf("bad percentage")
		}
		return *resource.NewQuantity(int64(float64(capacity.Value())*pct/100), resource.BinarySI), nil
	}
	return resource.ParseQuantity(v)
}
