package nodestatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/machine"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

func TestCapacityAndAllocatable(t *testing.T) {
	facts := func(hp ...machine.HugePages) machine.Facts {
		return machine.Facts{NumCPU: 2, MemoryCapacity: 8 * gi, EphemeralStorage: 100 * gi, PIDMax: 4194304, HugePages: hp}
	}
	reserved := &kubeletv1beta1.KubeletConfiguration{
		MaxPods:        110,
		KubeReserved:   map[string]string{"cpu": "100m", "memory": "256Mi"},
		SystemReserved: map[string]string{"memory": "256Mi", "ephemeral-storage": "1Gi"},
		EvictionHard:   map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
	}
	tests := []struct {
		name     string
		machine  machine.Facts
		cfg      *kubeletv1beta1.KubeletConfiguration
		capacity map[v1.ResourceName]string
		alloc    map[v1.ResourceName]string
	}{{
		name:     "no huge pages reserved: they are reported, at 0",
		machine:  facts(machine.HugePages{PageSize: gi}, machine.HugePages{PageSize: 2 * mi}),
		cfg:      reserved,
		capacity: map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"},
		// 100Gi - 1Gi - 10Gi (10% of 100Gi); 8Gi - 512Mi - 100Mi.
		alloc: map[v1.ResourceName]string{"cpu": "1900m", "memory": "7580Mi", "pods": "110", "ephemeral-storage": "89Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"},
	}, {
		name:     "huge pages reserved: capacity, and taken from allocatable memory, as upstream",
		machine:  facts(machine.HugePages{PageSize: gi, Pages: 1}, machine.HugePages{PageSize: 2 * mi, Pages: 512}),
		cfg:      &kubeletv1beta1.KubeletConfiguration{MaxPods: 10, KubeReserved: map[string]string{"hugepages-2Mi": "256Mi"}},
		capacity: map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "10", "ephemeral-storage": "100Gi", "hugepages-1Gi": "1Gi", "hugepages-2Mi": "1Gi"},
		alloc:    map[v1.ResourceName]string{"cpu": "2", "memory": "6Gi", "pods": "10", "ephemeral-storage": "100Gi", "hugepages-1Gi": "1Gi", "hugepages-2Mi": "768Mi"},
	}, {
		name:     "a machine without huge pages",
		machine:  facts(),
		cfg:      &kubeletv1beta1.KubeletConfiguration{MaxPods: 110},
		capacity: map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		alloc:    map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
	}, {
		name:     "allocatable memory never below zero",
		machine:  machine.Facts{NumCPU: 1, MemoryCapacity: gi, HugePages: []machine.HugePages{{PageSize: gi, Pages: 1}}},
		cfg:      &kubeletv1beta1.KubeletConfiguration{MaxPods: 1, SystemReserved: map[string]string{"memory": "100Mi"}},
		capacity: map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi", "pods": "1", "ephemeral-storage": "0", "hugepages-1Gi": "1Gi"},
		alloc:    map[v1.ResourceName]string{"cpu": "1", "memory": "0", "pods": "1", "ephemeral-storage": "0", "hugepages-1Gi": "1Gi"},
	}}
	check := func(t *testing.T, what string, got v1.ResourceList, want map[v1.ResourceName]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s %v, want %v", what, got, want)
		}
		for name, w := range want {
			if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
				t.Errorf("%s %s: %s, want %s", what, name, q.String(), w)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capacity := Capacity(tt.machine, tt.cfg.MaxPods)
			check(t, "capacity", capacity, tt.capacity)
			alloc, err := Allocatable(capacity, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			check(t, "allocatable", alloc, tt.alloc)
			check(t, "machine allocatable", MachineAllocatable(tt.cfg, tt.machine), tt.alloc)
		})
	}
	// A bad reservation is an error; the machine's allocatable is then its
	// capacity.
	bad := &kubeletv1beta1.KubeletConfiguration{MaxPods: 110, EvictionHard: map[string]string{"memory.available": "lots"}}
	if _, err := Allocatable(Capacity(facts(), 110), bad); err == nil {
		t.Error("a bad threshold was accepted")
	}
	check(t, "machine allocatable", MachineAllocatable(bad, facts()), map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"})
}

func TestAllocatableOf(t *testing.T) {
	var node *v1.Node
	alloc := AllocatableOf(&kubeletv1beta1.KubeletConfiguration{MaxPods: 10}, machine.Facts{NumCPU: 2, MemoryCapacity: 1 << 30},
		func() *v1.Node { return node })
	if got := alloc()[v1.ResourceCPU]; got.String() != "2" {
		t.Errorf("before registration: cpu %s, want the machine's 2", got.String())
	}
	node = &v1.Node{Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}}
	if got := alloc()[v1.ResourceCPU]; got.String() != "1500m" {
		t.Errorf("registered: cpu %s, want the Node's 1500m", got.String())
	}
	if got := AllocatableOf(&kubeletv1beta1.KubeletConfiguration{}, machine.Facts{NumCPU: 4}, nil)()[v1.ResourceCPU]; got.String() != "4" {
		t.Errorf("standalone: cpu %s, want 4", got.String())
	}
}
