package podsync

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// fakeResizes allocates cpu 100m to every pod and reports one condition.
type fakeResizes struct {
	observed []string
}

func (f *fakeResizes) UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	p := pod.DeepCopy()
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
	return p, true
}

func (f *fakeResizes) Conditions(types.UID) []v1.PodCondition {
	return []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred}}
}

func (f *fakeResizes) ObserveSync(_ context.Context, pod *v1.Pod, inProgress bool, resizeErr string) {
	state := "done"
	if inProgress {
		state = "in progress"
	}
	f.observed = append(f.observed, pod.Spec.Containers[0].Resources.Requests.Cpu().String()+" "+state+" "+resizeErr)
}

// TestSyncPodWithAllocation: the runtime syncs the pod with its allocated
// resources (not its spec's pending resize), the allocation manager is
// told how the sync left the resize, and the status has its conditions
// and allocatedResources.
func TestSyncPodWithAllocation(t *testing.T) {
	f := newFixture(t)
	rz := &fakeResizes{}
	f.s.cfg.Resizes = rz
	f.runtime.result.ResizeError = "cannot decrease memory limits: x"
	f.runtime.inProgress = true
	pod := testPod()
	pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := f.runtime.syncedPod.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "100m" {
		t.Errorf("runtime synced cpu %s, want the allocated 100m", got)
	}
	if len(rz.observed) != 1 || rz.observed[0] != "100m in progress cannot decrease memory limits: x" {
		t.Errorf("observed %q", rz.observed)
	}
	st, _ := f.statuses.Get(pod.UID)
	found := false
	for _, c := range st.Conditions {
		found = found || (c.Type == v1.PodResizePending && c.Reason == v1.PodReasonDeferred)
	}
	if !found {
		t.Errorf("no PodResizePending condition in %+v", st.Conditions)
	}
}
