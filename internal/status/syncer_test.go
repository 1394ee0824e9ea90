package status

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

func TestHoldFor(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := 100 * time.Millisecond
	for _, tc := range []struct {
		name      string
		last, now time.Time
		want      time.Duration
	}{
		{"nothing written yet", time.Time{}, t0, 0},
		{"a window after the last round", t0, t0.Add(w), 0},
		{"long after", t0, t0.Add(time.Minute), 0},
		{"right after a round", t0, t0, w},
		{"within the window", t0, t0.Add(30 * time.Millisecond), 70 * time.Millisecond},
	} {
		if got := holdFor(w, tc.last, tc.now); got != tc.want {
			t.Errorf("%s: holdFor = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSyncerWritesAtOnceThenGathers: a change after a quiet spell is
// written with no time passing; one right after that write waits for the
// window, and two pods' changes within it go out in one round.
// statusPatches counts the status patches client received.
func statusPatches(client *fake.Clientset) int {
	n := 0
	for _, act := range client.Actions() {
		if act.GetVerb() == "patch" && act.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// TestSyncerWritesAtOnceThenGathers runs in a synctest bubble, on the
// real clock, which is the bubble's fake one: after synctest.Wait the
// syncer waits (for a change, or for its window's timer), so each count
// of patches is exact, and no time passes unless the test sleeps.
func TestSyncerWritesAtOnceThenGathers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := func(name string) *v1.Pod {
			return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
		}
		a, b := pod("a"), pod("b")
		client := fake.NewClientset(a, b)
		idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, p := range []*v1.Pod{a, b} {
			if err := idx.Add(p); err != nil {
				t.Fatal(err)
			}
		}
		store := NewStore()
		s, err := NewSyncer(SyncerConfig{Client: client, Lister: corelisters.NewPodLister(idx), Store: store, Window: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		go s.Run(ctx)
		patches := func(when string, want int) {
			t.Helper()
			synctest.Wait()
			if n := statusPatches(client); n != want {
				t.Fatalf("%s: %d patches, want %d", when, n, want)
			}
		}
		store.Set(ctx, a, v1.PodStatus{Phase: v1.PodRunning})
		patches("the first change, with no time passing", 1)
		store.Set(ctx, a, v1.PodStatus{Phase: v1.PodSucceeded})
		store.Set(ctx, b, v1.PodStatus{Phase: v1.PodRunning})
		// Held for the window: the syncer waits on its timer and writes nothing.
		patches("changes within the window", 1)
		time.Sleep(99 * time.Millisecond)
		patches("just before the window ends", 1)
		time.Sleep(time.Millisecond)
		patches("both pods' changes in one round at the window's end", 3)
	})
}

// A status the store sets again unchanged keeps its version; the resync
// compares a pod's status with the API's only when that version or the API
// pod's resourceVersion changed since they last agreed.
func TestResyncComparesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a", ResourceVersion: "1"}}
	client := fake.NewClientset(a)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(a); err != nil {
		t.Fatal(err)
	}
	store := NewStore()
	s, err := NewSyncer(SyncerConfig{Client: client, Lister: corelisters.NewPodLister(idx), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	patches := func() int { return statusPatches(client) }
	write := func() {
		t.Helper()
		st, version, ok := store.GetVersioned("a")
		if !ok {
			t.Fatal("no status in the store")
		}
		if err := s.write(ctx, a, st, version); err != nil {
			t.Fatal(err)
		}
	}
	running := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}
	store.Set(ctx, a, running)
	_, v1st, _ := store.GetVersioned("a")
	write()
	if patches() != 1 {
		t.Fatalf("%d patches, want the first write", patches())
	}
	// The lister has not seen the patch (still resourceVersion 1, no
	// status): agreed at the patch's answer, nothing to compare.
	store.Set(ctx, a, *running.DeepCopy())
	if _, v, _ := store.GetVersioned("a"); v != v1st {
		t.Fatalf("the same status set again: version %d, want %d", v, v1st)
	}
	write()
	if patches() != 1 {
		t.Errorf("%d patches: an unchanged status at an unchanged resourceVersion was compared again", patches())
	}
	// Someone else changed the pod: compared, and written again.
	b := a.DeepCopy()
	b.ResourceVersion = "2"
	if err := idx.Update(b); err != nil {
		t.Fatal(err)
	}
	write()
	if patches() != 2 {
		t.Errorf("%d patches, want the status written again after the pod changed in the API", patches())
	}
	// Our status changes: a new version, compared and written.
	store.Set(ctx, a, v1.PodStatus{Phase: v1.PodSucceeded})
	if _, v, _ := store.GetVersioned("a"); v == v1st {
		t.Error("a changed status kept its version")
	}
	write()
	if patches() != 3 {
		t.Errorf("%d patches, want the changed status written", patches())
	}

	// A patch computed from an informer copy behind the API server's: the
	// server's copy had another pod IP, which the diff did not touch. The
	// answer is not what we wanted, so nothing is agreed and the next
	// resync compares (and writes) again.
	c := a.DeepCopy()
	c.Status = v1.PodStatus{Phase: v1.PodSucceeded, PodIP: "10.0.0.9"}
	if err := client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), c, "ns"); err != nil {
		t.Fatal(err)
	}
	stale := a.DeepCopy()
	stale.ResourceVersion = "3"
	stale.Status = v1.PodStatus{Phase: v1.PodSucceeded}
	if err := idx.Update(stale); err != nil {
		t.Fatal(err)
	}
	store.Set(ctx, a, v1.PodStatus{Phase: v1.PodSucceeded, Message: "done"})
	write()
	got, err := client.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patches() != 4 || got.Status.PodIP != "10.0.0.9" {
		t.Fatalf("%d patches, API pod IP %q: want the stale diff written, the server's IP left", patches(), got.Status.PodIP)
	}
	// The informer catches up with the answer (this fake keeps the
	// resourceVersion a patch answers with).
	if err := idx.Update(got); err != nil {
		t.Fatal(err)
	}
	write()
	if patches() != 5 {
		t.Errorf("%d patches: a patch whose answer differed from the wanted status was taken as agreed", patches())
	}
}

// TestHoldTerminal: as upstream's mergePodStatus, a terminal phase waits
// while the pod holds what only the node releases (its DRA claims): the
// rest of the status is written, the phase with its reason and message
// once the hold ends.
func TestHoldTerminal(t *testing.T) {
	ctx := context.Background()
	a := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "a", ResourceVersion: "1"},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}}
	client := fake.NewClientset(a)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(a); err != nil {
		t.Fatal(err)
	}
	held := true
	store := NewStore()
	s, err := NewSyncer(SyncerConfig{Client: client, Lister: corelisters.NewPodLister(idx), Store: store,
		HoldTerminal: func(uid types.UID) bool { return uid == "a" && held }})
	if err != nil {
		t.Fatal(err)
	}
	done := v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "gone", PodIP: "10.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}}}
	store.Set(ctx, a, done)
	apiPod := func() *v1.Pod {
		p, err := client.CoreV1().Pods("ns").Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	st, version, _ := store.GetVersioned("a")
	if err := s.write(ctx, a, st, version); err != nil {
		t.Fatal(err)
	}
	if p := apiPod(); p.Status.Phase != v1.PodRunning || p.Status.Reason != "" || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("held: phase %s reason %q, %d container statuses; want Running with the containers' statuses", p.Status.Phase, p.Status.Reason, len(p.Status.ContainerStatuses))
	}
	held = false
	cur := apiPod()
	if err := idx.Update(cur); err != nil {
		t.Fatal(err)
	}
	if err := s.write(ctx, cur, st, version); err != nil {
		t.Fatal(err)
	}
	if p := apiPod(); p.Status.Phase != v1.PodFailed || p.Status.Reason != "Evicted" || p.Status.Message != "gone" {
		t.Fatalf("released: phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
}
