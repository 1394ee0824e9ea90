package dra

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestContainerDynamicResources: the pod-resources API's view of a
// container's claims, as upstream's GetDynamicResources (including its
// CDI device list accumulating over a driver's devices); nothing for a
// container naming no claim or a claim not prepared.
func TestContainerDynamicResources(t *testing.T) {
	a := claimPod("a", "shared", "gpu")
	e := newDRAEnv(t, claimFor("shared", a))
	if got := e.m.ContainerDynamicResources(a, &a.Spec.Containers[0]); got != nil {
		t.Errorf("before the claim is prepared: %v", got)
	}
	if err := e.m.PrepareResources(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := e.m.ContainerDynamicResources(a, &a.Spec.Containers[0])
	if len(got) != 1 || got[0].ClaimName != "shared" || got[0].ClaimNamespace != "ns" || len(got[0].ClaimResources) != 2 {
		t.Fatalf("dynamic resources %v", got)
	}
	for i, want := range []struct {
		device string
		cdi    int
	}{{"gpu-0", 1}, {"nic-0", 2}} {
		r := got[0].ClaimResources[i]
		if r.DriverName != driverName || r.PoolName != "node" || r.DeviceName != want.device || len(r.CdiDevices) != want.cdi {
			t.Errorf("claim resource %d: %v, want device %s with %d CDI devices", i, r, want.device, want.cdi)
		}
	}
	none := &v1.Container{Name: "other"}
	if got := e.m.ContainerDynamicResources(a, none); got != nil {
		t.Errorf("a container naming no claim: %v", got)
	}
}
