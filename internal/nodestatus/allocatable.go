package nodestatus

import (
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/machine"
)

// Capacity is the node's capacity as upstream reports it: the machine's
// cpu, memory and hugepages-<size>, pods (maxPods) and ephemeral-storage
// (the size of the root directory's filesystem).
func Capacity(m machine.Facts, maxPods int32) v1.ResourceList {
	c := m.Capacity()
	c[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
	c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(m.EphemeralStorage, resource.BinarySI)
	return c
}

// Allocatable is the node's allocatable as upstream's MachineInfo setter
// computes it: machine.Allocatable of capacity (kubeReserved,
// systemReserved and the hard eviction thresholds subtracted), then the
// huge pages' capacity subtracted from memory too, never below zero.
func Allocatable(capacity v1.ResourceList, cfg *kubeletv1beta1.KubeletConfiguration) (v1.ResourceList, error) {
	alloc, err := machine.Allocatable(capacity, cfg.KubeReserved, cfg.SystemReserved, cfg.EvictionHard)
	if err != nil {
		return nil, err
	}
	mem, ok := alloc[v1.ResourceMemory]
	if !ok {
		return alloc, nil
	}
	for name, q := range capacity {
		if isHugePages(name) {
			mem.Sub(q)
		}
	}
	if mem.Sign() < 0 {
		mem = *resource.NewQuantity(0, mem.Format)
	}
	alloc[v1.ResourceMemory] = mem
	return alloc, nil
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// MachineAllocatable is the machine's allocatable as the Node reports it
// (Capacity, then Allocatable), capacity when a reservation is bad.
func MachineAllocatable(cfg *kubeletv1beta1.KubeletConfiguration, m machine.Facts) v1.ResourceList {
	capacity := Capacity(m, cfg.MaxPods)
	alloc, err := Allocatable(capacity, cfg)
	if err != nil {
		return capacity
	}
	return alloc
}

// AllocatableOf is the node's allocatable as pods' downward API and
// resource defaults read it: the Node's (node, nil standalone or before
// registration), else the machine's, computed once.
func AllocatableOf(cfg *kubeletv1beta1.KubeletConfiguration, m machine.Facts, node func() *v1.Node) func() v1.ResourceList {
	machineAlloc := sync.OnceValue(func() v1.ResourceList { return MachineAllocatable(cfg, m) })
	return func() v1.ResourceList {
		if node != nil {
			if n := node(); n != nil && len(n.Status.Allocatable) > 0 {
				return n.Status.Allocatable
			}
		}
		return machineAlloc()
	}
}
