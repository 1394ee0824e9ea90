package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func conds(types ...v1.PodConditionType) []v1.PodCondition {
	var out []v1.PodCondition
	for _, t := range types {
		out = append(out, v1.PodCondition{Type: t, Status: v1.ConditionTrue})
	}
	return out
}

func condTypes(cs []v1.PodCondition) []v1.PodConditionType {
	var out []v1.PodConditionType
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestMergeStatusKeepsForeignConditionsAndOrder(t *testing.T) {
	cur := v1.PodStatus{Conditions: append(conds(v1.PodScheduled, "DisruptionTarget", v1.PodReady), v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse})}
	ours := v1.PodStatus{Conditions: conds(v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled)}
	got := mergeStatus(cur, ours, false)
	want := []v1.PodConditionType{v1.PodScheduled, "DisruptionTarget", v1.PodReady, v1.PodInitialized, v1.PodReadyToStartContainers, v1.ContainersReady}
	if g := condTypes(got.Conditions); len(g) != len(want) {
		t.Fatalf("conditions %v, want %v", g, want)
	} else {
		for i := range want {
			if g[i] != want[i] {
				t.Fatalf("conditions %v, want %v", g, want)
			}
		}
	}
	if c := findCondition(got.Conditions, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("our Initialized condition did not replace the API's")
	}
	// The node's own DisruptionTarget (an eviction) replaces the API's.
	evicted := v1.PodStatus{Conditions: append(ours.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet})}
	if c := findCondition(mergeStatus(cur, evicted, false).Conditions, v1.DisruptionTarget); c == nil || c.Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("our DisruptionTarget was not written: %+v", c)
	}
	// A pod bound without PodScheduled gets it; a static pod's comes from us.
	got = mergeStatus(v1.PodStatus{}, ours, false)
	if findCondition(got.Conditions, v1.PodScheduled) == nil {
		t.Errorf("no PodScheduled for a bound pod: %v", condTypes(got.Conditions))
	}
	// PodScheduled is the kubelet's too (upstream's PodConditionsByKubelet):
	// ours, with the pod's generation, keeping the scheduler's transition
	// time while it stays True.
	sched := metav1.NewTime(time.Unix(1000, 0))
	cur = v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: sched, ObservedGeneration: 1}}}
	ours = v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(2000, 0)), ObservedGeneration: 2}}}
	if c := findCondition(mergeStatus(cur, ours, false).Conditions, v1.PodScheduled); c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&sched) {
		t.Errorf("PodScheduled %+v, want generation 2 since %v", c, sched)
	}
}

func TestNewSyncer(t *testing.T) {
	client := fake.NewClientset()
	lister := corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	store := NewStore()
	ctortest.Run(t, NewSyncer, []ctortest.Case[SyncerConfig]{
		{Name: "no client", Config: SyncerConfig{Lister: lister, Store: store}, WantErr: "SyncerConfig.Client is required"},
		{Name: "no lister", Config: SyncerConfig{Client: client, Store: store}, WantErr: "SyncerConfig.Lister is required"},
		{Name: "no store", Config: SyncerConfig{Client: client, Lister: lister}, WantErr: "SyncerConfig.Store is required"},
		{Name: "a nil clock is the real one", Config: SyncerConfig{Client: client, Lister: lister, Store: store}},
	}, func(t *testing.T, s *Syncer) {
		ctortest.RealClock(t, s.clock)
		if s.window != 100*time.Millisecond || s.resync != 10*time.Second {
			t.Errorf("window %v, resync %v; want the defaults 100ms, 10s", s.window, s.resync)
		}
	})
}
