package syncloop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podmanager"
	"github.com/nodelet/nodelet/internal/source/apiserver"
	"github.com/nodelet/nodelet/internal/status"
)

// fakeWorkers records what the main loop asks of the pod workers, one
// line per call, and keeps the state the view reads.
type fakeWorkers struct {
	calls    []string
	live     map[types.UID]bool
	finished map[types.UID]bool
}

func newFakeWorkers() *fakeWorkers {
	return &fakeWorkers{live: map[types.UID]bool{}, finished: map[types.UID]bool{}}
}

func (f *fakeWorkers) Sync(p *v1.Pod) {
	f.calls = append(f.calls, "sync "+p.Name)
	f.live[p.UID] = true
}
func (f *fakeWorkers) Terminate(uid types.UID, p *v1.Pod, rp *kubecontainer.RunningPod, grace *int64) {
	name := string(uid)
	if p != nil {
		name = p.Name
	} else if rp != nil {
		name = "runtime:" + rp.Name
	}
	if grace != nil {
		name += fmt.Sprintf(" grace=%d", *grace)
	}
	f.calls = append(f.calls, "terminate "+name)
}
func (f *fakeWorkers) Notify(uid types.UID)       { f.calls = append(f.calls, "notify "+string(uid)) }
func (f *fakeWorkers) Readded(uid types.UID) bool { return false }
func (f *fakeWorkers) Forget(uid types.UID) {
	f.calls = append(f.calls, "forget "+string(uid))
	delete(f.finished, uid)
}
func (f *fakeWorkers) Finished() []types.UID {
	var out []types.UID
	for uid := range f.finished {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
func (f *fakeWorkers) Live(uid types.UID) bool        { return f.live[uid] }
func (f *fakeWorkers) Has(uid types.UID) bool         { return f.live[uid] || f.finished[uid] }
func (f *fakeWorkers) Terminating(uid types.UID) bool { return false }

// take returns the calls so far and forgets them.
func (f *fakeWorkers) take() []string {
	c := f.calls
	f.calls = nil
	return c
}

type fakeOffline struct {
	restored map[types.UID]bool
	synced   int
}

func (f *fakeOffline) Restored(uid types.UID) bool       { return f.restored[uid] }
func (f *fakeOffline) Synced(context.Context, []*v1.Pod) { f.synced++ }

type fakeDirs struct {
	uids     []types.UID
	removed  []types.UID
	cgroups  []types.UID
	backoffs int
}

func (f *fakeDirs) PodUIDs() ([]types.UID, error) { return f.uids, nil }
func (f *fakeDirs) Teardown(uid types.UID) error {
	f.removed = append(f.removed, uid)
	return nil
}
func (f *fakeDirs) CleanupOrphans(_ context.Context, keep func(types.UID) bool) ([]types.UID, error) {
	for _, uid := range f.uids {
		if !keep(uid) {
			f.cgroups = append(f.cgroups, uid)
		}
	}
	return nil, nil
}

// harness is a main loop over fakes: a real pod manager, view, status
// store and admission chain whose handler refuses pods named "refused*".
type harness struct {
	loop     *Loop
	workers  *fakeWorkers
	offline  *fakeOffline
	dirs     *fakeDirs
	recorder *record.FakeRecorder
	released []types.UID
	node     *v1.Node
	relist   []*kubecontainer.RunningPod
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{workers: newFakeWorkers(), offline: &fakeOffline{restored: map[types.UID]bool{}}, dirs: &fakeDirs{},
		recorder: record.NewFakeRecorder(100), node: &v1.Node{}}
	pods := podmanager.New()
	statuses := status.NewStore()
	view, err := podmanager.NewView(podmanager.ViewConfig{Pods: pods, Statuses: statuses, Workers: h.workers})
	if err != nil {
		t.Fatal(err)
	}
	chain := admission.NewChain(admission.Named{Name: "test", Handler: admission.HandlerFunc(func(_ context.Context, a admission.Attributes) admission.Result {
		if len(a.Pod.Name) >= 7 && a.Pod.Name[:7] == "refused" {
			return admission.Result{Reason: "OutOfcpu", Message: fmt.Sprintf("%d others", len(a.OtherPods))}
		}
		return admission.Result{Admit: true}
	})})
	chain.OnReject(func(p *v1.Pod, _ admission.Result) { h.released = append(h.released, p.UID) })
	h.loop, err = New(Config{
		Pods: pods, View: view, Workers: h.workers, Admission: chain, Statuses: statuses, Recorder: h.recorder,
		AdmissionNode: func() *v1.Node { return h.node },
		Release:       func(uid types.UID) { h.released = append(h.released, uid) },
		Redundant:     func(e *pleg.Event) bool { return e.ID == "redundant" },
		Relisted:      func() ([]*kubecontainer.RunningPod, bool) { return h.relist, true },
		Offline:       h.offline,
		Leftovers:     Leftovers{PodDirs: h.dirs, PodLogsDir: t.TempDir(), Cgroups: h.dirs, GCBackoff: func() { h.dirs.backoffs++ }},
		SourcesReady:  &lifecycle.Ready{},
		Clock:         testingclock.NewFakeClock(time.Unix(0, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func pod(name string, created int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), CreationTimestamp: metav1.Unix(created, 0)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
}

// The source events the main loop folds into the desired state, and what
// each makes the pod workers do.
func TestApply(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	l := h.loop

	// The API's first full set: admitted in creation order, the refused one
	// failed with the handler's reason.
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Set, Pods: []*v1.Pod{pod("b", 2), pod("refused", 3), pod("a", 1)}})
	if got, want := h.workers.take(), []string{"forget a", "sync a", "forget b", "sync b"}; !slices.Equal(got, want) {
		t.Errorf("first set: %v, want %v", got, want)
	}
	if !l.cfg.Pods.Rejected("refused") {
		t.Error("the refused pod is not marked rejected")
	}
	if st, ok := l.cfg.Statuses.Get("refused"); !ok || st.Phase != v1.PodFailed || st.Reason != "OutOfcpu" || st.Message != "Pod was rejected: 2 others" {
		t.Errorf("refused pod's status %+v, want Failed OutOfcpu with the two admitted pods as the others", st)
	}
	if e := <-h.recorder.Events; e != "Warning OutOfcpu 2 others" {
		t.Errorf("event %q", e)
	}
	if !slices.Equal(h.released, []types.UID{"refused"}) {
		t.Errorf("released %v, want the refused pod's devices", h.released)
	}
	if h.offline.synced != 1 || l.cfg.SourcesReady.IsReady() {
		t.Errorf("synced %d, sources ready %v: want the checkpoint told, the file source not seen yet", h.offline.synced, l.cfg.SourcesReady.IsReady())
	}

	// An update of a rejected pod does nothing; a deletion terminates
	// with the deletion grace period; a removal terminates and releases.
	refused := pod("refused", 3)
	refused.Labels = map[string]string{"x": "y"}
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{refused}})
	deleting := pod("a", 1)
	deleting.DeletionTimestamp = ptr.To(metav1.Unix(10, 0))
	deleting.DeletionGracePeriodSeconds = ptr.To[int64](5)
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{deleting}})
	h.released = nil
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Delete, Pods: []*v1.Pod{pod("b", 2)}})
	if got, want := h.workers.take(), []string{"terminate a grace=5", "terminate b"}; !slices.Equal(got, want) {
		t.Errorf("updates: %v, want %v", got, want)
	}
	if !slices.Equal(h.released, []types.UID{"b"}) {
		t.Errorf("released %v, want b's devices", h.released)
	}

	// A rejected pod being deleted is terminated by its worker, which
	// finishes it (final status, deletion from the API); so is one that
	// is already being deleted when it is refused (created and deleted
	// while nodelet was down).
	refused = refused.DeepCopy()
	refused.DeletionTimestamp = ptr.To(metav1.Unix(20, 0))
	refused.DeletionGracePeriodSeconds = ptr.To[int64](30)
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{refused}})
	late := pod("refused-late", 5)
	late.DeletionTimestamp = ptr.To(metav1.Unix(20, 0))
	late.DeletionGracePeriodSeconds = ptr.To[int64](30)
	l.applyAPI(ctx, apiserver.Event{Op: apiserver.Update, Pods: []*v1.Pod{late}})
	if got, want := h.workers.take(), []string{"terminate refused grace=30", "terminate refused-late grace=30"}; !slices.Equal(got, want) {
		t.Errorf("rejected pods being deleted: %v, want %v", got, want)
	}
	if st, ok := l.cfg.Statuses.Get("refused-late"); !ok || st.Phase != v1.PodFailed || st.Reason != "OutOfcpu" {
		t.Errorf("refused-late's status %+v, want Failed OutOfcpu", st)
	}
	<-h.recorder.Events

	// A static pod: the file source's set, then the URL's, make the
	// sources ready.
	l.apply(ctx, l.cfg.Pods.Set(SourceFile, []*v1.Pod{pod("static", 4)}))
	l.Seen(SourceFile)
	if l.cfg.SourcesReady.IsReady() {
		t.Error("sources ready before the manifest URL's was seen")
	}
	l.Seen(SourceHTTP)
	if !l.cfg.SourcesReady.IsReady() {
		t.Error("sources not ready after all three were seen")
	}
	h.workers.take()

	// A mirror pod changed: its static pod's worker is told.
	l.mirrorChanged(pod("static", 4))
	l.mirrorChanged(pod("unknown", 4))
	if got, want := h.workers.take(), []string{"notify static"}; !slices.Equal(got, want) {
		t.Errorf("mirror pods: %v, want %v", got, want)
	}
}

// Pods wait for the Node to be registered, and are admitted by the
// housekeeping after it is, unless they changed or went meanwhile; a pod
// restored from the offline checkpoint is not admitted again.
func TestPendingAndRestored(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	l := h.loop
	h.node = nil
	h.offline.restored["restored"] = true
	l.apply(ctx, l.cfg.Pods.Set(SourceAPI, []*v1.Pod{pod("waits", 1), pod("goes", 2), pod("restored", 3)}))
	if got, want := h.workers.take(), []string{"forget restored", "sync restored"}; !slices.Equal(got, want) {
		t.Fatalf("before the Node: %v, want only the restored pod run", got)
	}
	if len(l.pending) != 2 {
		t.Fatalf("pending %d, want 2", len(l.pending))
	}
	l.apply(ctx, l.cfg.Pods.Remove(SourceAPI, pod("goes", 2)))
	h.workers.take()
	l.housekeeping(ctx) // still no Node
	if got := h.workers.take(); len(got) != 0 {
		t.Fatalf("admitted without a Node: %v", got)
	}
	h.node = &v1.Node{}
	l.housekeeping(ctx)
	if got, want := h.workers.take(), []string{"forget waits", "sync waits"}; !slices.Equal(got, want) {
		t.Errorf("after registration: %v, want %v", got, want)
	}
	if len(l.pending) != 0 {
		t.Errorf("pending %d after admission", len(l.pending))
	}
}

// PLEG events the last sync already saw are dropped; probe results and
// the others wake the pod's worker; the loop stops with ctx or with a
// fatal loop's error.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		plegEvents := make(chan *pleg.Event, 2)
		probes := make(chan types.UID, 1)
		abort := make(chan struct{})
		plegEvents <- &pleg.Event{ID: "redundant"}
		plegEvents <- &pleg.Event{ID: "changed"}
		probes <- "probed"
		done := make(chan error)
		go func() {
			done <- h.loop.Run(t.Context(), Inputs{PLEG: plegEvents, Probes: probes, Abort: abort, AbortErr: func() error { return fmt.Errorf("healthz: boom") }})
		}()
		synctest.Wait() // the loop took every event and waits for more
		if got := h.workers.take(); !slices.Equal(got, []string{"notify changed", "notify probed"}) && !slices.Equal(got, []string{"notify probed", "notify changed"}) {
			t.Errorf("notifications %v, want changed and probed only", got)
		}
		close(abort)
		if err := <-done; err == nil || err.Error() != "healthz: boom" {
			t.Errorf("run returned %v, want the fatal loop's error", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := h.loop.Run(ctx, Inputs{}); err != nil {
			t.Errorf("run with ctx done: %v", err)
		}
	})
}

// Housekeeping waits for every source, then stops runtime pods nobody
// wants, forgets finished workers whose pods left the runtime, and removes
// the directories, logs and cgroups of pods nobody knows.
func TestHousekeeping(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	l := h.loop
	l.apply(ctx, l.cfg.Pods.Set(SourceAPI, []*v1.Pod{pod("wanted", 1)}))
	h.workers.take()
	h.workers.finished["finished-gone"] = true
	h.workers.finished["finished-in-runtime"] = true
	h.relist = []*kubecontainer.RunningPod{{UID: "wanted", Name: "wanted"}, {UID: "stray", Name: "stray"}, {UID: "finished-in-runtime", Name: "f"}}
	h.dirs.uids = []types.UID{"wanted", "stray", "gone", "finished-gone"}
	for _, uid := range h.dirs.uids {
		if err := os.MkdirAll(kuberuntime.PodLogDir(l.cfg.Leftovers.PodLogsDir, "ns", string(uid), uid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.housekeeping(ctx)
	if got := h.workers.take(); len(got) != 0 || len(h.dirs.removed) != 0 || h.dirs.backoffs != 0 {
		t.Fatalf("housekeeping before the sources were seen: %v, removed %v", got, h.dirs.removed)
	}
	l.Seen(SourceFile)
	l.Seen(SourceHTTP)
	l.Seen(SourceAPI)
	l.housekeeping(ctx)
	if got, want := h.workers.take(), []string{"terminate runtime:stray", "forget finished-gone"}; !slices.Equal(got, want) {
		t.Errorf("workers: %v, want %v", got, want)
	}
	// "finished-gone" was forgotten just before: nobody knows it any more.
	if want := []types.UID{"gone", "finished-gone"}; !slices.Equal(h.dirs.removed, want) {
		t.Errorf("directories removed %v, want %v", h.dirs.removed, want)
	}
	if want := []types.UID{"gone", "finished-gone"}; !slices.Equal(h.dirs.cgroups, want) {
		t.Errorf("cgroups removed %v, want %v", h.dirs.cgroups, want)
	}
	logs, _ := os.ReadDir(l.cfg.Leftovers.PodLogsDir)
	var left []string
	for _, e := range logs {
		left = append(left, filepath.Base(e.Name()))
	}
	if want := []string{"ns_stray_stray", "ns_wanted_wanted"}; !slices.Equal(left, want) {
		t.Errorf("log dirs left %v, want %v", left, want)
	}
	if h.dirs.backoffs != 1 {
		t.Errorf("back-offs collected %d times, want 1", h.dirs.backoffs)
	}
}

// A pod that came back while its worker terminated it runs again.
func TestOnTerminated(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.loop.apply(ctx, h.loop.cfg.Pods.Set(SourceFile, []*v1.Pod{pod("back", 1)}))
	h.workers.take()
	h.loop.OnTerminated(context.Background(), "back")
	h.loop.OnTerminated(context.Background(), "gone")
	if got, want := h.workers.take(), []string{"forget back", "sync back"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
