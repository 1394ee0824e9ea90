package memorymanager

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// reservation checks reservedMemory against the machine and the node
// allocatable reservation as upstream does (the NUMA nodes exist; per
// memory type, the sum over the nodes equals kubeReserved + systemReserved
// + the hard eviction threshold) and returns it by node. The Static
// policy needs some reserved memory.
func reservation(nodes []NUMANode, nodeReservation v1.ResourceList, reserved []kubeletv1beta1.MemoryReservation) (reservedMemory, error) {
	exists := map[int]bool{}
	for _, n := range nodes {
		exists[n.ID] = true
	}
	totals := map[v1.ResourceName]*resource.Quantity{}
	out := reservedMemory{}
	for _, n := range nodes {
		out[n.ID] = map[v1.ResourceName]uint64{}
	}
	for _, r := range reserved {
		if !exists[int(r.NumaNode)] {
			return nil, fmt.Errorf("the reserved memory configuration references a NUMA node %d that does not exist on this machine", r.NumaNode)
		}
		for name, q := range r.Limits {
			if totals[name] == nil {
				totals[name] = resource.NewQuantity(0, resource.DecimalSI)
			}
			totals[name].Add(q)
			v, ok := q.AsInt64()
			if !ok {
				return nil, fmt.Errorf("could not covert a variable of type Quantity to int64")
			}
			out[int(r.NumaNode)][name] = uint64(v)
		}
	}
	types := map[v1.ResourceName]bool{}
	for name := range totals {
		types[name] = true
	}
	for name := range nodeReservation {
		if isMemoryType(name) {
			types[name] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(types)) {
		want := resource.NewQuantity(0, resource.DecimalSI)
		if q, ok := nodeReservation[name]; ok {
			want.Add(q)
		}
		got := resource.NewQuantity(0, resource.DecimalSI)
		if totals[name] != nil {
			got.Add(*totals[name])
		}
		if !want.Equal(*got) {
			return nil, fmt.Errorf("the total amount %q of type %q is not equal to the value %q determined by Node Allocatable feature", got.String(), name, want.String())
		}
	}
	var memory uint64
	for _, byType := range out {
		memory += byType[v1.ResourceMemory]
	}
	if memory == 0 {
		return nil, fmt.Errorf("[memorymanager] you should specify the system reserved memory")
	}
	return out, nil
}
