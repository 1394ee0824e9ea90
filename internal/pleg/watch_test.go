package pleg

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

// lockedLister is a fakeLister safe for the Run goroutine.
type lockedLister struct {
	mu    sync.Mutex
	pods  []*kubecontainer.RunningPod
	calls atomic.Int32
}

func (l *lockedLister) GetPods(context.Context) ([]*kubecontainer.RunningPod, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pods, nil
}

func (l *lockedLister) set(p ...*kubecontainer.RunningPod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pods = p
}

// chanWatcher forwards what the test sends; unsupported makes it refuse.
type chanWatcher struct {
	unsupported bool
	ids         chan string
	calls       atomic.Int32
}

func (w *chanWatcher) Name() string { return "test" }

func (w *chanWatcher) Watch(ctx context.Context, established func(), changed func(string, bool)) error {
	w.calls.Add(1)
	if w.unsupported {
		return ErrUnsupported
	}
	established()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case id := <-w.ids:
			changed(id, true)
		}
	}
}

// waitEvent waits for an event, moving the fake clock past the minimum
// gap between event-driven relists meanwhile.
// waitStreaming waits for the first relist, then the one the established
// stream asks for.
func waitStreaming(t *testing.T, g *Generic, l *lockedLister, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.calls.Load() < 2 || !g.streaming.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("relists %d, streaming %v", l.calls.Load(), g.streaming.Load())
		}
		time.Sleep(time.Millisecond)
		clk.Step(minRelistGap)
	}
}

func waitEvent(t *testing.T, g *Generic, clk *testingclock.FakeClock) *Event {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-g.Watch():
			return e
		case <-deadline:
			t.Fatal("no PLEG event")
			return nil
		case <-time.After(2 * time.Millisecond):
			if clk.HasWaiters() {
				clk.Step(minRelistGap)
			}
		}
	}
}

func noEvent(t *testing.T, g *Generic) {
	t.Helper()
	select {
	case e := <-g.Watch():
		t.Fatalf("unexpected event %+v", e)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestEventsTriggerRelist(t *testing.T) {
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	run, exit := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
	l := &lockedLister{}
	l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": run}))
	clk := testingclock.NewFakeClock(time.Now())
	refusing := &chanWatcher{unsupported: true}
	w := &chanWatcher{ids: make(chan string)}
	g := newGeneric(t, Config{Lister: l, Period: time.Second, EventedPeriod: 10 * time.Second, Clock: clk, Watchers: []Watcher{refusing, w}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	waitStreaming(t, g, l, clk)
	if refusing.calls.Load() != 1 {
		t.Fatalf("the unsupported watcher was asked %d times", refusing.calls.Load())
	}

	// The container exits; the event makes the PLEG relist with no tick.
	l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit}))
	w.ids <- "c1"
	if e := waitEvent(t, g, clk); e.Type != ContainerDied || e.Data != "c1" {
		t.Fatalf("got %+v", e)
	}

	// The runtime publishes the exit before its list shows it: the PLEG
	// relists again after pendingRetry until it does.
	l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit, "c2": run}))
	w.ids <- "c2" // c2 appears running (a relist happens)
	if e := waitEvent(t, g, clk); e.Type != ContainerStarted || e.Data != "c2" {
		t.Fatalf("got %+v", e)
	}
	w.ids <- "c2" // "c2 stopped", but the list still says running
	noEvent(t, g)
	l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit, "c2": exit}))
	for i := 0; i < 3; i++ {
		clk.Step(pendingRetry)
		time.Sleep(10 * time.Millisecond)
	}
	if e := waitEvent(t, g, clk); e.Type != ContainerDied || e.Data != "c2" {
		t.Fatalf("got %+v", e)
	}

	// While streaming, ticks relist only every EventedPeriod.
	before := l.calls.Load()
	stepSeconds(clk, 5)
	if n := l.calls.Load() - before; n != 0 {
		t.Fatalf("%d relists in 5 s of streaming; want none before the evented period", n)
	}
	stepSeconds(clk, 6)
	if n := l.calls.Load() - before; n != 1 {
		t.Fatalf("%d relists after 11 s of streaming; want 1", n)
	}
}

func TestWatcherErrorsFallBackToPeriod(t *testing.T) {
	l := &lockedLister{}
	clk := testingclock.NewFakeClock(time.Now())
	broken := &brokenWatcher{}
	g := newGeneric(t, Config{Lister: l, Period: time.Second, Clock: clk, Watchers: []Watcher{broken}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for broken.calls.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher was never started")
		}
		time.Sleep(time.Millisecond)
	}
	before := l.calls.Load()
	stepSeconds(clk, 3)
	if n := l.calls.Load() - before; n < 2 {
		t.Fatalf("%d relists in 3 periods with a broken stream", n)
	}
	if broken.calls.Load() < 2 {
		t.Fatalf("a broken stream is retried; calls %d", broken.calls.Load())
	}
}

type brokenWatcher struct{ calls atomic.Int32 }

func (w *brokenWatcher) Name() string { return "broken" }
func (w *brokenWatcher) Watch(context.Context, func(), func(string, bool)) error {
	w.calls.Add(1)
	return errors.New("connection refused")
}

func TestParseEnvelope(t *testing.T) {
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, v)
	}
	exit := func(cid, id string) []byte {
		var v []byte
		v = field(v, 1, []byte(cid))
		v = field(v, 2, []byte(id))
		v = protowire.AppendTag(v, 3, protowire.VarintType)
		v = protowire.AppendVarint(v, 1234) // pid
		anyMsg := field(nil, 1, []byte("containerd.events.TaskExit"))
		anyMsg = field(anyMsg, 2, v)
		var env []byte
		env = field(env, 1, []byte{8, 1}) // timestamp{seconds: 1}
		env = field(env, 2, []byte("k8s.io"))
		env = field(env, 3, []byte("/tasks/exit"))
		return field(env, 4, anyMsg)
	}
	for _, tc := range []struct {
		name           string
		msg            []byte
		cid, id, topic string
		ok             bool
	}{
		{"init process", exit("c1", "c1"), "c1", "c1", "/tasks/exit", true},
		{"exec process", exit("c1", "exec-7"), "c1", "exec-7", "/tasks/exit", true},
		{"truncated", exit("c1", "c1")[:20], "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, cid, id, ok := parseEnvelope(tc.msg)
			if ok != tc.ok || topic != tc.topic || cid != tc.cid || id != tc.id {
				t.Fatalf("got %q %q %q %v", topic, cid, id, ok)
			}
		})
	}
}

// A stop the runtime reports but its list never shows: after a second of
// retries the PLEG relists every Period again for a while, as without
// events.
func TestPendingStopGivesUpToPeriodicRelist(t *testing.T) {
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	run := runtimeapi.ContainerState_CONTAINER_RUNNING
	l := &lockedLister{}
	l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": run}))
	clk := testingclock.NewFakeClock(time.Now())
	w := &chanWatcher{ids: make(chan string)}
	g := newGeneric(t, Config{Lister: l, Period: time.Second, EventedPeriod: 10 * time.Second, Clock: clk, Watchers: []Watcher{w}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx)
	waitStreaming(t, g, l, clk)
	w.ids <- "c1" // "stopped", but listed running for ever
	// Retries every pendingRetry until pendingMaxTries.
	for i := 0; i < pendingMaxTries+5; i++ {
		time.Sleep(2 * time.Millisecond)
		clk.Step(pendingRetry)
	}
	time.Sleep(10 * time.Millisecond)
	g.pending.mu.Lock()
	left := len(g.pending.ids)
	g.pending.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d IDs still pending after %d tries", left, pendingMaxTries)
	}
	before := l.calls.Load()
	stepSeconds(clk, 3)
	if n := l.calls.Load() - before; n < 2 {
		t.Fatalf("%d relists in 3 s after giving up on a stop; want one a second", n)
	}
}

// stepSeconds moves clk on by n seconds, one at a time, leaving the PLEG's
// goroutines a moment after each step.
func stepSeconds(clk *testingclock.FakeClock, n int) {
	for i := 0; i < n; i++ {
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}
