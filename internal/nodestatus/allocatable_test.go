package nodestatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestAllocatable(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("2"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	got, err := Allocatable(capacity,
		map[string]string{"cpu": "100m", "memory": "256Mi"},
		map[string]string{"memory": "256Mi", "ephemeral-storage": "1Gi"},
		map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[v1.ResourceName]string{
		v1.ResourceCPU:              "1900m",
		v1.ResourceMemory:           "7580Mi",
		v1.ResourcePods:             "110",
		v1.ResourceEphemeralStorage: "89Gi", // 100Gi - 1Gi - 10Gi (10% of 100Gi)
	} {
		q := got[name]
		if w := resource.MustParse(want); q.Cmp(w) != 0 {
			t.Errorf("%s: %s, want %s", name, q.String(), w.String())
		}
	}
	// Reservations larger than capacity floor at zero; bad values are errors.
	got, _ = Allocatable(capacity, map[string]string{"cpu": "3"}, nil, nil)
	if q := got[v1.ResourceCPU]; !q.IsZero() {
		t.Errorf("cpu %s, want 0", q.String())
	}
	if _, err := Allocatable(capacity, nil, nil, map[string]string{"memory.available": "lots"}); err == nil {
		t.Error("a bad threshold was accepted")
	}
}
