package nodestatus

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Allocatable is capacity minus kubeReserved, systemReserved and the hard
// eviction thresholds (memory.available from memory, nodefs.available from
// ephemeral-storage), as upstream computes it; never below zero.
func Allocatable(capacity v1.ResourceList, kubeReserved, systemReserved, evictionHard map[string]string) (v1.ResourceList, error) {
	reserved := v1.ResourceList{}
	for _, m := range []map[string]string{kubeReserved, systemReserved} {
		for k, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("reserved %s=%q: %w", k, v, err)
			}
			podspec.AddResource(reserved, v1.ResourceName(k), q)
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
		podspec.AddResource(reserved, res, q)
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

// MachineAllocatable is this machine's allocatable as the Node reports it:
// capacity (cpu, memory, pods, ephemeral storage of rootDir, hugepages)
// minus the reservations and hard eviction thresholds of cfg.
func MachineAllocatable(cfg *kubeletv1beta1.KubeletConfiguration, rootDir string) v1.ResourceList {
	capacity := readMachine(rootDir).capacity(cfg.MaxPods)
	alloc, err := Allocatable(capacity, cfg.KubeReserved, cfg.SystemReserved, cfg.EvictionHard)
	if err != nil {
		return capacity
	}
	return alloc
}
