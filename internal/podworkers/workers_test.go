package podworkers

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// restarting records each CleanupPod's restarting argument.
	restarting []bool
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

func (f *fakeSyncer) CleanupPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.RunningPod, restarting bool) error {
	f.mu.Lock()
	f.restarting = append(f.restarting, restarting)
	f.mu.Unlock()
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

// closed tells whether ch is closed, without waiting: called after
// synctest.Wait, when whatever was going to close it has done so.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wantCount fails t unless the pod had exactly n calls of op.
func wantCount(t *testing.T, f *fakeSyncer, uid types.UID, op string, n int, when string) {
	t.Helper()
	if got := f.count(uid, op); got != n {
		t.Fatalf("%s: %d %s calls for %s, want %d", when, got, op, uid, n)
	}
}

func newPod(uid string) *v1.Pod {
	p := &v1.Pod{}
	p.UID, p.Name, p.Namespace = types.UID(uid), uid, "default"
	return p
}

// The tests run in a synctest bubble: the workers' timers run on the
// bubble's fake clock (the real clock inside it), and synctest.Wait returns
// once every worker is blocked, so "nothing happened" is checked after the
// workers did all they were going to do, not after a sleep.

func TestSyncResyncAndTerminate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}}
		done := make(chan struct{})
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute, OnTerminated: func(uid types.UID) {
			if uid == "a" {
				close(done)
			}
		}})

		a := newPod("a")
		ws.Sync(a)
		synctest.Wait()
		wantCount(t, f, "a", "sync", 1, "after Sync")

		// No sync without a reason until the resync period (plus up to a
		// tenth of it of jitter) passes.
		time.Sleep(59 * time.Second)
		synctest.Wait()
		wantCount(t, f, "a", "sync", 1, "before the resync period")
		time.Sleep(8 * time.Second)
		synctest.Wait()
		wantCount(t, f, "a", "sync", 2, "after the resync period and its jitter")

		// A PLEG notification syncs at once.
		ws.Notify("a")
		synctest.Wait()
		wantCount(t, f, "a", "sync", 3, "after Notify")

		ws.Terminate("a", a, nil, nil)
		synctest.Wait()
		if !closed(done) {
			t.Fatal("the termination did not finish")
		}
		wantCount(t, f, "a", "terminate", 1, "after Terminate")
		// A finished pod is not synced again until forgotten.
		ws.Sync(a)
		synctest.Wait()
		wantCount(t, f, "a", "sync", 3, "a terminated pod synced again")
		ws.Forget("a")
		ws.Sync(a)
		synctest.Wait()
		wantCount(t, f, "a", "sync", 4, "after Forget")
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.overlap {
			t.Error("two calls for one pod overlapped")
		}
	})
}

func TestRequeueAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, next: 10 * time.Second}
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute})
		ws.Sync(newPod("b"))
		synctest.Wait()
		wantCount(t, f, "b", "sync", 1, "after Sync")
		time.Sleep(9 * time.Second)
		synctest.Wait()
		wantCount(t, f, "b", "sync", 1, "before the requeue")
		time.Sleep(time.Second)
		synctest.Wait()
		wantCount(t, f, "b", "sync", 2, "at the requeue")
	})
}

func TestTerminateCancelsInFlightSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, block: make(chan struct{})}
		done := make(chan struct{})
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute, OnTerminated: func(types.UID) { close(done) }})
		p := newPod("c")
		ws.Sync(p)
		synctest.Wait()
		wantCount(t, f, "c", "sync", 1, "after Sync")
		ws.Terminate("c", p, nil, nil)
		synctest.Wait()
		if !closed(done) {
			t.Fatal("termination waited for the blocked sync")
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.canceled != 1 {
			t.Errorf("the in-flight sync was not canceled")
		}
		if f.overlap {
			t.Error("terminate overlapped the sync")
		}
	})
}

// A second kill request for a pod already terminating does not restart the
// termination, unless it shortens the grace period.
func TestTerminateTwiceKeepsTheTerminationInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, termBlock: make(chan struct{})}
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute})
		pod := &v1.Pod{}
		pod.UID = "u1"
		thirty, five := int64(30), int64(5)
		ws.Terminate(pod.UID, pod, nil, &thirty)
		synctest.Wait()
		wantCount(t, f, pod.UID, "terminate", 1, "after Terminate")
		ws.Terminate(pod.UID, pod, nil, nil)     // the pod left its source
		ws.Terminate(pod.UID, pod, nil, &thirty) // the same grace again
		// A pod terminated with its own grace (nil: the default 30 s) and then
		// with an explicit 30 s: the same, nothing restarts.
		other := &v1.Pod{}
		other.UID = "u2"
		ws.Terminate(other.UID, other, nil, nil)
		synctest.Wait()
		wantCount(t, f, other.UID, "terminate", 1, "the second pod's termination")
		ws.Terminate(other.UID, other, nil, &thirty)
		synctest.Wait()
		f.mu.Lock()
		canceled := f.termCanceled
		f.mu.Unlock()
		if canceled != 0 || f.count(pod.UID, "terminate") != 1 || f.count(other.UID, "terminate") != 1 {
			t.Fatalf("terminations %d and %d, canceled %d: want the first ones left alone", f.count(pod.UID, "terminate"), f.count(other.UID, "terminate"), canceled)
		}
		ws.Terminate(pod.UID, pod, nil, &five) // shorter: restart with it
		synctest.Wait()
		wantCount(t, f, pod.UID, "terminate", 2, "after a shorter grace period")
		close(f.termBlock)
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.termCanceled != 1 {
			t.Fatalf("canceled %d, want 1", f.termCanceled)
		}
	})
}

// Once the pod is stopped, a shorter grace period (the API server sets 0
// when it deletes the pod at the cleanup's own request) does not cut the
// cleanup short.
func TestShorterGraceLeavesTheCleanupAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, cleanBlock: make(chan struct{})}
		done := make(chan struct{})
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute, OnTerminated: func(types.UID) { close(done) }})
		pod := newPod("p")
		thirty, zero := int64(30), int64(0)
		ws.Terminate(pod.UID, pod, nil, &thirty)
		synctest.Wait()
		wantCount(t, f, pod.UID, "cleanup", 1, "after Terminate")
		ws.Terminate(pod.UID, pod, nil, &zero)
		synctest.Wait()
		f.mu.Lock()
		canceled := f.cleanCanceled
		f.mu.Unlock()
		if canceled != 0 {
			t.Fatalf("a shorter grace period canceled the cleanup")
		}
		close(f.cleanBlock)
		synctest.Wait()
		if !closed(done) {
			t.Fatal("termination did not finish")
		}
		if stops, cleanups := f.count(pod.UID, "terminate"), f.count(pod.UID, "cleanup"); stops != 1 || cleanups != 1 {
			t.Fatalf("stops %d, cleanups %d: want one of each", stops, cleanups)
		}
	})
}

// Interrupt cuts a sync in flight short and syncs again at once; Live is
// true until the worker finished.
func TestInterruptAndLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, block: make(chan struct{})}
		done := make(chan struct{})
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Hour, OnTerminated: func(types.UID) { close(done) }})
		if ws.Live("d") {
			t.Fatal("live before any worker")
		}
		p := newPod("d")
		ws.Sync(p)
		synctest.Wait()
		wantCount(t, f, "d", "sync", 1, "after Sync")
		ws.Interrupt("d")
		synctest.Wait()
		wantCount(t, f, "d", "sync", 2, "after Interrupt")
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
		synctest.Wait()
		if !closed(done) {
			t.Fatal("termination did not finish")
		}
		if ws.Live("d") {
			t.Error("live after the worker finished")
		}
		if !ws.Has("d") {
			t.Error("Has forgets a finished pod")
		}
	})
}

// A pod added again while it terminates (a static pod's manifest removed
// and put back): its cleanup is told it restarts, and OnTerminated follows;
// Readded does nothing to a pod that is not terminating.
func TestReaddedWhileTerminating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSyncer{inSync: map[types.UID]int{}, termBlock: make(chan struct{})}
		terminated := make(chan types.UID, 2)
		ws := newWorkers(t, Config{Context: t.Context(), Syncer: f, Resync: time.Minute,
			OnTerminated: func(uid types.UID) { terminated <- uid }})
		running, gone := newPod("running"), newPod("gone")
		ws.Sync(running)
		synctest.Wait()
		if ws.Readded(running.UID) || ws.Readded("nobody") {
			t.Fatal("Readded true for a pod that is not terminating")
		}
		ws.Terminate(gone.UID, gone, nil, nil)
		synctest.Wait()
		if !ws.Readded(gone.UID) {
			t.Fatal("Readded false for a terminating pod")
		}
		close(f.termBlock)
		synctest.Wait()
		if uid := <-terminated; uid != gone.UID {
			t.Fatalf("OnTerminated(%s)", uid)
		}
		ws.Terminate(running.UID, running, nil, nil)
		synctest.Wait()
		<-terminated
		// Added back, then removed again before it finished terminating:
		// not restarting after all (its mirror pod must go).
		f.termBlock = make(chan struct{})
		again := newPod("again")
		ws.Terminate(again.UID, again, nil, nil)
		synctest.Wait()
		ws.Readded(again.UID)
		ws.Terminate(again.UID, again, nil, nil)
		close(f.termBlock)
		synctest.Wait()
		<-terminated
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.restarting) != 3 || !f.restarting[0] || f.restarting[1] || f.restarting[2] {
			t.Fatalf("cleanups' restarting %v, want [true false false]", f.restarting)
		}
	})
}
