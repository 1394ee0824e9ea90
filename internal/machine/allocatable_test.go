package machine

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestCapacity(t *testing.T) {
	f := Facts{NumCPU: 2, MemoryCapacity: 8 * gi, PIDMax: 1000, HugePages: []HugePages{{PageSize: gi, Pages: 1}, {PageSize: 2 * mi}}}
	got := f.Capacity()
	want := map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "hugepages-1Gi": "1Gi", "hugepages-2Mi": "0"}
	if len(got) != len(want) {
		t.Errorf("capacity %v, want %v", got, want)
	}
	for name, w := range want {
		if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s: %s, want %s", name, q.String(), w)
		}
	}
	if got := HugePageResourceName(64 << 10); got != "hugepages-64Ki" {
		t.Errorf("HugePageResourceName = %s", got)
	}
}

func TestAllocatable(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-2Mi":             resource.MustParse("1Gi"),
		"pid":                       resource.MustParse("1000"),
	}
	tests := []struct {
		name                                     string
		kubeReserved, systemReserved, evictionHd map[string]string
		want                                     map[v1.ResourceName]string
		wantErr                                  bool
	}{{
		name:           "reservations and thresholds",
		kubeReserved:   map[string]string{"cpu": "100m", "memory": "256Mi", "pid": "100"},
		systemReserved: map[string]string{"memory": "256Mi", "ephemeral-storage": "1Gi", "hugepages-2Mi": "256Mi"},
		evictionHd:     map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		want: map[v1.ResourceName]string{
			v1.ResourceCPU:              "1900m",
			v1.ResourceMemory:           "7580Mi",
			v1.ResourcePods:             "110",
			v1.ResourceEphemeralStorage: "89Gi", // 100Gi - 1Gi - 10Gi (10% of 100Gi)
			"hugepages-2Mi":             "768Mi",
			"pid":                       "900",
		},
	}, {
		name: "nothing reserved",
		want: map[v1.ResourceName]string{"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi", "pid": "1000"},
	}, {
		name:         "what capacity lacks is ignored, more than capacity is zero",
		kubeReserved: map[string]string{"cpu": "3", "nvidia.com/gpu": "1"},
		evictionHd:   map[string]string{"memory.available": "100%", "imagefs.available": "15%"},
		want:         map[v1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi", "pid": "1000"},
	}, {
		name:           "summed, then subtracted",
		kubeReserved:   map[string]string{"cpu": "3"},
		systemReserved: map[string]string{"cpu": "-2"},
		want:           map[v1.ResourceName]string{"cpu": "1", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi", "pid": "1000"},
	}, {
		name:         "a bad reservation",
		kubeReserved: map[string]string{"memory": "lots"},
		wantErr:      true,
	}, {
		name:       "a bad threshold",
		evictionHd: map[string]string{"memory.available": "lots"},
		wantErr:    true,
	}, {
		name:       "a bad percentage",
		evictionHd: map[string]string{"nodefs.available": "150%"},
		wantErr:    true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Allocatable(capacity, tt.kubeReserved, tt.systemReserved, tt.evictionHd)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for name, want := range tt.want {
				q := got[name]
				if w := resource.MustParse(want); q.Cmp(w) != 0 {
					t.Errorf("%s: %s, want %s", name, q.String(), w.String())
				}
			}
		})
	}
	if q := capacity[v1.ResourceMemory]; q.Cmp(resource.MustParse("8Gi")) != 0 {
		t.Errorf("capacity changed: memory %s", q.String())
	}
}
