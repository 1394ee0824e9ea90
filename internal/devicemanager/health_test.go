package devicemanager

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestAllocatedResourcesStatus: the containers' allocatedResourcesStatus
// as upstream's device manager gives it (ResourceHealthStatus): one entry
// per resource, one per device, a device the plugin reports unhealthy
// Unhealthy; the pods using the resource are told when its health is
// reported again; other entries (DRA claims') are kept.
func TestAllocatedResourcesStatus(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	told := make(chan []types.UID, 10)
	h.m.OnPodsChanged(func(uids []types.UID) { told <- uids })
	f := &fakePlugin{opts: &pluginapi.DevicePluginOptions{}, devs: devices("d1", "d2", "d3"), updates: make(chan struct{}, 10)}
	f.start(t, dir, "fake.sock")
	h.waitFor(t, "registered", func(c, a int64) bool { return c == 3 && a == 3 })
	p := devPod("p1", 2, 0)
	if err := h.m.AllocatePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h.pods = append(h.pods, p)
	status := func() []v1.ResourceStatus {
		st := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", AllocatedResourcesStatus: []v1.ResourceStatus{
			{Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "x", Health: v1.ResourceHealthStatusUnknown}}}}}, {Name: "other"}}}
		h.m.UpdateAllocatedResourcesStatus(p, st)
		if len(st.ContainerStatuses[1].AllocatedResourcesStatus) != 0 {
			t.Errorf("a container without devices got %v", st.ContainerStatuses[1].AllocatedResourcesStatus)
		}
		return st.ContainerStatuses[0].AllocatedResourcesStatus
	}
	want := func(health2 v1.ResourceHealthStatus) []v1.ResourceStatus {
		return []v1.ResourceStatus{{Name: "claim:gpu", Resources: []v1.ResourceHealth{{ResourceID: "x", Health: v1.ResourceHealthStatusUnknown}}},
			{Name: res, Resources: []v1.ResourceHealth{{ResourceID: "d1", Health: v1.ResourceHealthStatusHealthy}, {ResourceID: "d2", Health: health2}}}}
	}
	if got := status(); !slices.EqualFunc(got, want(v1.ResourceHealthStatusHealthy), resourceStatusEqual) {
		t.Fatalf("healthy: %v", got)
	}
	f.setHealth("d2", pluginapi.Unhealthy)
	select {
	case uids := <-told:
		if !slices.Equal(uids, []types.UID{"p1"}) {
			t.Errorf("pods told %v, want p1", uids)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pod using the device was not told of its health")
	}
	if got := status(); !slices.EqualFunc(got, want(v1.ResourceHealthStatusUnhealthy), resourceStatusEqual) {
		t.Fatalf("d2 unhealthy: %v", got)
	}
}

func resourceStatusEqual(a, b v1.ResourceStatus) bool {
	return a.Name == b.Name && slices.Equal(a.Resources, b.Resources)
}
