package podworkers

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/kubecontainer"
)

// newWorkers is New for tests: it fails the test on an error.
func newWorkers(t *testing.T, cfg Config) *Workers {
	t.Helper()
	ws, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestNew(t *testing.T) {
	ctx := context.Background()
	syncer := &fakeSyncer{inSync: map[types.UID]int{}}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no context", Config: Config{Syncer: syncer}, WantErr: "Config.Context is required"},
		{Name: "no syncer", Config: Config{Context: ctx}, WantErr: "Config.Syncer is required"},
		{Name: "a nil clock is the real one", Config: Config{Context: ctx, Syncer: syncer}},
	}, func(t *testing.T, ws *Workers) {
		ctortest.RealClock(t, ws.cfg.Clock)
	})
}

type call struct {
	op  string
	uid types.UID
}

type fakeSyncer struct {
	mu       sync.Mutex
	calls    []call
	inSync   map[types.UID]int
	overlap  bool
	block    chan struct{} // SyncPod waits on it (or ctx) when set
	next     time.Duration
	canceled int
	// termBlock makes TerminatePod wait on it (or ctx); termCanceled
	// counts the terminations cut short.
	termBlock    chan struct{}
	termCanceled int
	// cleanBlock makes CleanupPod wait on it (or ctx); cleanCanceled
	// counts the cleanups cut short.
	cleanBlock    chan struct{}
	cleanCanceled int
}

func (f *fakeSyncer) enter(uid types.UID, op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{op, uid})
	f.inSync[uid]++
	if f.inSync[uid] > 1 {
		f.overlap = true
	}
}

func (f *fakeSyncer) leave(uid types.UID) {
	f.mu.Lock()
	f.inSync[uid]--
	f.mu.Unlock()
}

func (f *fakeSyncer) SyncPod(ctx context.Context, pod *v1.Pod) (time.Duration, error) {
	f.enter(pod.UID, "sync")
	defer f.leave(pod.UID)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			f.mu.Lock()
			f.canceled++
			f.mu.Unlock()
		}
	}
	return f.next, nil
}

func (f *fakeSyncer) StopPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.RunningPod, _ *int64) error {
	return f.blockingOp(ctx, pod.UID, "terminate", f.termBlock, &f.termCanceled)
}

func (f *fakeSyncer) CleanupPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.RunningPod) error {
	return f.blockingOp(ctx, pod.UID, "cleanup", f.cleanBlock, &f.cleanCanceled)
}

// blockingOp records op and waits on block (when set) or ctx, counting
// in canceled the calls ctx cut short.
func (f *fakeSyncer) blockingOp(ctx context.Context, uid types.UID, op string, block chan struct{}, canceled *int) error {
	f.enter(uid, op)
	defer f.leave(uid)
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			f.mu.Lock()
			*canceled++
			f.mu.Unlock()
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeSyncer) count(uid types.UID, op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.uid == uid && c.op == op {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newPod(uid string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), uid, "default"
	return p
}

func TestSyncResyncAndTerminate(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}}
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var terminated sync.Map
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Clock: clk, Resync: time.Minute, OnTerminated: func(uid types.UID) { terminated.Store(uid, true) }})

	a := newPod("a")
	ws.Sync(a)
	waitFor(t, "first sync", func() bool { return f.count("a", "sync") == 1 })

	// No sync without a reason until the resync period (plus jitter) passes.
	clk.Step(30 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if n := f.count("a", "sync"); n != 1 {
		t.Fatalf("synced %d times before the resync period", n)
	}
	clk.Step(40 * time.Second)
	waitFor(t, "periodic resync", func() bool { return f.count("a", "sync") == 2 })

	// A PLEG notification syncs at once.
	ws.Notify("a")
	waitFor(t, "notified sync", func() bool { return f.count("a", "sync") == 3 })

	ws.Terminate("a", a, nil, nil)
	waitFor(t, "termination", func() bool { _, ok := terminated.Load(types.UID("a")); return ok })
	if f.count("a", "terminate") != 1 {
		t.Errorf("terminated %d times", f.count("a", "terminate"))
	}
	// A finished pod is not synced again until forgotten.
	ws.Sync(a)
	time.Sleep(50 * time.Millisecond)
	if n := f.count("a", "sync"); n != 3 {
		t.Errorf("a terminated pod was synced again (%d syncs)", n)
	}
	ws.Forget("a")
	ws.Sync(a)
	waitFor(t, "sync after Forget", func() bool { return f.count("a", "sync") == 4 })
	if f.overlap {
		t.Error("two calls for one pod overlapped")
	}
}

func TestRequeueAfter(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}, next: 10 * time.Second}
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Clock: clk, Resync: time.Minute})
	ws.Sync(newPod("b"))
	waitFor(t, "first sync", func() bool { return f.count("b", "sync") == 1 })
	waitFor(t, "timer armed", func() bool { return clk.HasWaiters() })
	clk.Step(10 * time.Second)
	waitFor(t, "requeued sync", func() bool { return f.count("b", "sync") == 2 })
}

func TestTerminateCancelsInFlightSync(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}, block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Resync: time.Minute, OnTerminated: func(types.UID) { close(done) }})
	p := newPod("c")
	ws.Sync(p)
	waitFor(t, "sync started", func() bool { return f.count("c", "sync") == 1 })
	ws.Terminate("c", p, nil, nil)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("termination waited for the blocked sync")
	}
	if f.canceled != 1 {
		t.Errorf("the in-flight sync was not canceled")
	}
	if f.overlap {
		t.Error("terminate overlapped the sync")
	}
}

// A second kill request for a pod already terminating does not restart the
// termination, unless it shortens the grace period.
func TestTerminateTwiceKeepsTheTerminationInFlight(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}, termBlock: make(chan struct{})}
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Clock: clk, Resync: time.Minute})
	pod := &v1.Pod{}
	pod.UID = "u1"
	thirty, five := int64(30), int64(5)
	ws.Terminate(pod.UID, pod, nil, &thirty)
	waitFor(t, "termination started", func() bool { return f.count(pod.UID, "terminate") == 1 })
	ws.Terminate(pod.UID, pod, nil, nil)     // the pod left its source
	ws.Terminate(pod.UID, pod, nil, &thirty) // the same grace again
	// A pod terminated with its own grace (nil: the default 30 s) and then
	// with an explicit 30 s: the same, nothing restarts.
	other := &v1.Pod{}
	other.UID = "u2"
	ws.Terminate(other.UID, other, nil, nil)
	waitFor(t, "second pod's termination started", func() bool { return f.count(other.UID, "terminate") == 1 })
	ws.Terminate(other.UID, other, nil, &thirty)
	time.Sleep(50 * time.Millisecond)
	f.mu.Lock()
	canceled := f.termCanceled
	f.mu.Unlock()
	if canceled != 0 || f.count(pod.UID, "terminate") != 1 || f.count(other.UID, "terminate") != 1 {
		t.Fatalf("terminations %d, canceled %d: want the first one left alone", f.count(pod.UID, "terminate"), canceled)
	}
	ws.Terminate(pod.UID, pod, nil, &five) // shorter: restart with it
	waitFor(t, "termination restarted", func() bool { return f.count(pod.UID, "terminate") == 2 })
	close(f.termBlock)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.termCanceled != 1 {
		t.Fatalf("canceled %d, want 1", f.termCanceled)
	}
}

// Once the pod is stopped, a shorter grace period (the API server sets 0
// when it deletes the pod at the cleanup's own request) does not cut the
// cleanup short.
func TestShorterGraceLeavesTheCleanupAlone(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}, cleanBlock: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Resync: time.Minute, OnTerminated: func(types.UID) { close(done) }})
	pod := newPod("p")
	thirty, zero := int64(30), int64(0)
	ws.Terminate(pod.UID, pod, nil, &thirty)
	waitFor(t, "cleanup started", func() bool { return f.count(pod.UID, "cleanup") == 1 })
	ws.Terminate(pod.UID, pod, nil, &zero)
	time.Sleep(50 * time.Millisecond)
	close(f.cleanBlock)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("termination did not finish")
	}
	f.mu.Lock()
	canceled := f.cleanCanceled
	f.mu.Unlock()
	if stops, cleanups := f.count(pod.UID, "terminate"), f.count(pod.UID, "cleanup"); canceled != 0 || stops != 1 || cleanups != 1 {
		t.Fatalf("stops %d, cleanups %d, canceled %d: want one of each, none canceled", stops, cleanups, canceled)
	}
}

// Interrupt cuts a sync in flight short and syncs again at once; Live is
// true until the worker finished.
func TestInterruptAndLive(t *testing.T) {
	f := &fakeSyncer{inSync: map[types.UID]int{}, block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	ws := newWorkers(t, Config{Context: ctx, Syncer: f, Resync: time.Hour, OnTerminated: func(types.UID) { close(done) }})
	if ws.Live("d") {
		t.Fatal("live before any worker")
	}
	p := newPod("d")
	ws.Sync(p)
	waitFor(t, "sync started", func() bool { return f.count("d", "sync") == 1 })
	ws.Interrupt("d")
	waitFor(t, "sync started again", func() bool { return f.count("d", "sync") == 2 })
	f.mu.Lock()
	canceled := f.canceled
	f.mu.Unlock()
	if canceled != 1 {
		t.Errorf("%d syncs canceled, want the one in flight", canceled)
	}
	if !ws.Live("d") {
		t.Error("not live while syncing")
	}
	close(f.block)
	ws.Terminate("d", p, nil, nil)
	<-done
	waitFor(t, "worker gone", func() bool { return !ws.Live("d") })
	if !ws.Has("d") {
		t.Error("Has forgets a finished pod")
	}
}
