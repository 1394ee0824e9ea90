package cli

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestOutcome(t *testing.T) {
	ready := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		done, ok bool
	}{
		{"pending", pod("p", nil), false, false},
		{"running, not ready", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
		}), false, false},
		{"running and ready", pod("p", func(p *v1.Pod) {
			p.Status.Phase, p.Status.Conditions = v1.PodRunning, ready
		}), true, true},
		{"succeeded", pod("p", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }), true, true},
		{"failed", pod("p", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }), true, false},
		{"image pull", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
		}), true, false},
		{"creating", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}), false, false},
		{"init crash loop", pod("p", func(p *v1.Pod) {
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if done, ok, why := outcome(tc.pod); done != tc.done || ok != tc.ok {
				t.Fatalf("outcome = %v %v %q, want %v %v", done, ok, why, tc.done, tc.ok)
			}
		})
	}
}
