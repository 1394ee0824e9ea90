package podmanager

import (
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/ctortest"
)

type fakeStatuses map[types.UID]v1.PodStatus

func (f fakeStatuses) Get(uid types.UID) (v1.PodStatus, bool) { st, ok := f[uid]; return st, ok }

// fakeWorkers: each pod's worker state by UID ("live", "terminating",
// "finished"; absent: no worker).
type fakeWorkers map[types.UID]string

func (f fakeWorkers) Live(uid types.UID) bool        { return f[uid] == "live" || f[uid] == "terminating" }
func (f fakeWorkers) Has(uid types.UID) bool         { _, ok := f[uid]; return ok }
func (f fakeWorkers) Terminating(uid types.UID) bool { return f[uid] == "terminating" }

type fakeEvictions map[types.UID]bool

func (f fakeEvictions) Evicted(uid types.UID) bool { return f[uid] }

func sortedNames(ps []*v1.Pod) []string {
	out := names(ps)
	sort.Strings(out)
	return out
}

func TestNewView(t *testing.T) {
	ctortest.Run(t, NewView, []ctortest.Case[ViewConfig]{
		{Name: "no pods", Config: ViewConfig{Statuses: fakeStatuses{}, Workers: fakeWorkers{}}, WantErr: "ViewConfig.Pods is required"},
		{Name: "no statuses", Config: ViewConfig{Pods: New(), Workers: fakeWorkers{}}, WantErr: "ViewConfig.Statuses is required"},
		{Name: "no workers", Config: ViewConfig{Pods: New(), Statuses: fakeStatuses{}}, WantErr: "ViewConfig.Workers is required"},
		{Name: "the optional ones left out", Config: ViewConfig{Pods: New(), Statuses: fakeStatuses{}, Workers: fakeWorkers{}}},
	}, nil)
}

// One node's pods in every state, and what each question answers.
func TestView(t *testing.T) {
	m := New()
	running := pod("running", "x", 1)
	deleting := pod("deleting", "x", 2)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	stopping := pod("stopping", "x", 3)      // its worker stops it (evicted, shutdown)
	doneHere := pod("done-here", "x", 4)     // finished by its containers: status Succeeded here
	doneInAPI := pod("done-in-api", "x", 5)  // Failed in the API already
	notStarted := pod("not-started", "x", 6) // admitted, worker not started yet
	workerDone := pod("worker-done", "x", 7) // worker finished, status not yet terminal
	rejected := pod("rejected", "x", 8)      // refused by admission
	doneInAPI.Status.Phase = v1.PodFailed
	m.Set("api", []*v1.Pod{running, deleting, stopping, doneHere, doneInAPI, notStarted, workerDone, rejected})
	m.Reject("rejected")
	pending := pod("pending", "x", 9)
	statuses := fakeStatuses{"done-here": {Phase: v1.PodSucceeded}, "running": {Phase: v1.PodRunning, Message: "fresh"}}
	workers := fakeWorkers{"running": "live", "deleting": "terminating", "stopping": "terminating", "done-here": "finished",
		"worker-done": "finished", "gone-from-sources": "finished"}
	v, err := NewView(ViewConfig{Pods: m, Statuses: statuses, Workers: workers, Evictions: fakeEvictions{"evicted-gone": true, "running": true},
		Pending: func() []*v1.Pod { return []*v1.Pod{pending} }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		question string
		got      []*v1.Pod
		want     []string
	}{
		{"Active", v.Active(""), []string{"deleting", "not-started", "running", "stopping", "worker-done"}},
		{"Active except running", v.Active("running"), []string{"deleting", "not-started", "stopping", "worker-done"}},
		{"Live", v.Live(), []string{"deleting", "running", "stopping"}},
		{"Running", v.Running(), []string{"running"}},
		{"ResourceHolders", v.ResourceHolders(), []string{"deleting", "pending", "running", "stopping"}},
		{"Pods", v.Pods(), []string{"deleting", "done-here", "done-in-api", "not-started", "running", "stopping", "worker-done"}},
	} {
		if got := sortedNames(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.question, got, tc.want)
		}
	}

	inRuntime := map[types.UID]bool{"only-in-runtime": true}
	for _, tc := range []struct {
		uid              types.UID
		known, removable bool
	}{
		{"running", true, true}, // evicted: its leftovers may go while it is wanted
		{"not-started", true, false},
		{"gone-from-sources", true, false}, // its worker is still remembered
		{"only-in-runtime", true, true},    // nobody wants it: the runtime's copy goes
		{"rejected", false, true},
		{"evicted-gone", false, true},
		{"unknown", false, true},
	} {
		if got := v.Known(tc.uid, inRuntime); got != tc.known {
			t.Errorf("Known(%s) = %v, want %v", tc.uid, got, tc.known)
		}
		if got := v.Removable(string(tc.uid)); got != tc.removable {
			t.Errorf("Removable(%s) = %v, want %v", tc.uid, got, tc.removable)
		}
	}

	p, ok := v.PodByName("ns", "running")
	if !ok || p.Status.Message != "fresh" {
		t.Errorf("PodByName: %v %v, want the pod with its latest status", p, ok)
	}
	if running.Status.Message != "" {
		t.Error("PodByName wrote the status into the pod manager's copy")
	}
	if _, ok := v.PodByName("ns", "rejected"); ok {
		t.Error("PodByName found a rejected pod")
	}
}
