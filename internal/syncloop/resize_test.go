package syncloop

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/allocation"
	"github.com/nodelet/nodelet/internal/source/apiserver"
)

// TestResizeThroughTheLoop wires a real allocation manager: pods are
// admitted through it (their allocation recorded), a resize that fits is
// allocated before the pod's worker syncs it, one that does not is
// deferred and retried when another pod is removed, and that pod's sync
// follows.
func TestResizeThroughTheLoop(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	l := h.loop
	// The node has 1 CPU.
	fits := func(_ context.Context, a admission.Attributes) admission.Result {
		used := a.Pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		for _, p := range a.OtherPods {
			used += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
		if used > 1000 {
			return admission.Result{Reason: "OutOfcpu", Message: "no room"}
		}
		return admission.Result{Admit: true}
	}
	m, err := allocation.New(allocation.Config{Admit: fits, Pod: l.cfg.Pods.Get, Active: func() []*v1.Pod { return l.cfg.View.Active("") },
		Recorder: h.recorder})
	if err != nil {
		t.Fatal(err)
	}
	l.cfg.Allocation = m
	withCPU := func(name, cpu string) *v1.Pod {
		p := pod(name, 1)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Set, Pods: []*v1.Pod{withCPU("a", "300m"), withCPU("b", "600m")}})
	h.workers.take()
	if !m.HasAllocation("a") || !m.HasAllocation("b") {
		t.Fatal("admitted pods have no allocation")
	}

	// a to 400m fits.
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{withCPU("a", "400m")}})
	if got := h.workers.take(); !slices.Equal(got, []string{"sync a"}) {
		t.Errorf("calls %v", got)
	}
	if p, _ := m.UpdatePodFromAllocation(withCPU("a", "1")); p.Spec.Containers[0].Resources.Requests.Cpu().String() != "400m" {
		t.Errorf("a allocated %s", p.Spec.Containers[0].Resources.Requests.Cpu())
	}

	// a to 800m does not: deferred, allocation kept.
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{withCPU("a", "800m")}})
	h.workers.take()
	if c := m.Conditions("a"); len(c) != 2 || c[0].Type != v1.PodResizePending || c[0].Reason != v1.PodReasonDeferred {
		t.Errorf("conditions %+v", c)
	}
	// b goes: a's resize is retried and allocated, a synced.
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Delete, Pods: []*v1.Pod{withCPU("b", "600m")}})
	if got := h.workers.take(); !slices.Equal(got, []string{"terminate b", "sync a"}) {
		t.Errorf("calls %v", got)
	}
	if p, _ := m.UpdatePodFromAllocation(withCPU("a", "1")); p.Spec.Containers[0].Resources.Requests.Cpu().String() != "800m" {
		t.Errorf("a allocated %s after b went", p.Spec.Containers[0].Resources.Requests.Cpu())
	}
	if m.HasAllocation("b") {
		t.Error("b's allocation kept")
	}
}
