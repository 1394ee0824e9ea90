package pleg

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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

// The tests of Run run in a synctest bubble, on the real clock, which is
// the bubble's fake one: time passes only when every goroutine is blocked,
// and synctest.Wait returns once the PLEG did all it would do, so "no event"
// and "no relist" are facts, not the outcome of a sleep.

// waitStreaming checks the first relist, then the one the established
// stream asks for, minRelistGap later.
func waitStreaming(t *testing.T, g *Generic, l *lockedLister) {
	t.Helper()
	synctest.Wait()
	if n := l.calls.Load(); n != 1 || !g.streaming.Load() {
		t.Fatalf("relists %d, streaming %v; want the first relist and the stream established", n, g.streaming.Load())
	}
	time.Sleep(minRelistGap)
	synctest.Wait()
	if n := l.calls.Load(); n != 2 {
		t.Fatalf("relists %d; want a second one once the stream is established", n)
	}
}

// nextEvent lets the time an event-driven relist may wait pass, and
// returns the event it emitted.
func nextEvent(t *testing.T, g *Generic) *Event {
	t.Helper()
	time.Sleep(minRelistGap)
	synctest.Wait()
	select {
	case e := <-g.Watch():
		return e
	default:
		t.Fatal("no PLEG event")
		return nil
	}
}

// noEvent checks that the PLEG emitted nothing (after synctest.Wait).
func noEvent(t *testing.T, g *Generic) {
	t.Helper()
	select {
	case e := <-g.Watch():
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}

// relists returns how many relists Run made while time moved on by d.
func relists(l *lockedLister, d time.Duration) int32 {
	before := l.calls.Load()
	time.Sleep(d)
	synctest.Wait()
	return l.calls.Load() - before
}

func TestEventsTriggerRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ready := runtimeapi.PodSandboxState_SANDBOX_READY
		run, exit := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED
		l := &lockedLister{}
		l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": run}))
		refusing := &chanWatcher{unsupported: true}
		w := &chanWatcher{ids: make(chan string)}
		g := newGeneric(t, Config{Lister: l, Period: time.Second, EventedPeriod: 10 * time.Second, Watchers: []Watcher{refusing, w}})
		go g.Run(t.Context())
		waitStreaming(t, g, l)
		if refusing.calls.Load() != 1 {
			t.Fatalf("the unsupported watcher was asked %d times", refusing.calls.Load())
		}

		// The container exits; the event makes the PLEG relist with no tick.
		l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit}))
		w.ids <- "c1"
		if e := nextEvent(t, g); e.Type != ContainerDied || e.Data != "c1" {
			t.Fatalf("got %+v", e)
		}

		// The runtime publishes the exit before its list shows it: the PLEG
		// relists again after pendingRetry until it does.
		l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit, "c2": run}))
		w.ids <- "c2" // c2 appears running (a relist happens)
		if e := nextEvent(t, g); e.Type != ContainerStarted || e.Data != "c2" {
			t.Fatalf("got %+v", e)
		}
		w.ids <- "c2" // "c2 stopped", but the list still says running
		time.Sleep(minRelistGap)
		synctest.Wait()
		noEvent(t, g)
		l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": exit, "c2": exit}))
		if e := nextEvent(t, g); e.Type != ContainerDied || e.Data != "c2" {
			t.Fatalf("got %+v", e)
		}

		// While streaming, ticks relist only every EventedPeriod.
		if n := relists(l, 5*time.Second); n != 0 {
			t.Fatalf("%d relists in 5 s of streaming; want none before the evented period", n)
		}
		if n := relists(l, 6*time.Second); n != 1 {
			t.Fatalf("%d relists in the next 6 s of streaming; want 1", n)
		}
	})
}

func TestWatcherErrorsFallBackToPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lockedLister{}
		broken := &brokenWatcher{}
		g := newGeneric(t, Config{Lister: l, Period: time.Second, Watchers: []Watcher{broken}})
		go g.Run(t.Context())
		synctest.Wait()
		if n := broken.calls.Load(); n != 1 {
			t.Fatalf("the watcher was started %d times, want once", n)
		}
		if n := relists(l, 3*time.Second); n != 3 {
			t.Fatalf("%d relists in 3 periods with a broken stream, want 3", n)
		}
		if broken.calls.Load() < 2 {
			t.Fatalf("a broken stream is retried; calls %d", broken.calls.Load())
		}
	})
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
	synctest.Test(t, func(t *testing.T) {
		ready := runtimeapi.PodSandboxState_SANDBOX_READY
		run := runtimeapi.ContainerState_CONTAINER_RUNNING
		l := &lockedLister{}
		l.set(rpod("a", ready, map[string]runtimeapi.ContainerState{"c1": run}))
		w := &chanWatcher{ids: make(chan string)}
		g := newGeneric(t, Config{Lister: l, Period: time.Second, EventedPeriod: 10 * time.Second, Watchers: []Watcher{w}})
		go g.Run(t.Context())
		waitStreaming(t, g, l)
		w.ids <- "c1" // "stopped", but listed running for ever
		// Retries every pendingRetry until pendingMaxTries.
		if n := relists(l, minRelistGap+pendingMaxTries*pendingRetry); n != pendingMaxTries {
			t.Fatalf("%d relists for a pending stop, want %d", n, pendingMaxTries)
		}
		g.pending.mu.Lock()
		left := len(g.pending.ids)
		g.pending.mu.Unlock()
		if left != 0 {
			t.Fatalf("%d IDs still pending after %d tries", left, pendingMaxTries)
		}
		if n := relists(l, 3*time.Second); n != 3 {
			t.Fatalf("%d relists in 3 s after giving up on a stop; want one a second", n)
		}
	})
}
