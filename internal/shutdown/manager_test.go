package shutdown

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/ctortest"
)

// fakeLogind is logind as the manager sees it: locks are pipes whose read
// end sees EOF when the manager lets go, as logind's.
type fakeLogind struct {
	mu       sync.Mutex
	delay    time.Duration
	raised   time.Duration
	events   chan bool
	inhibits int
	released chan struct{} // one value per lock closed
	closed   bool
	// preparing is the PreparingForShutdown property.
	preparing bool
}

func newFakeLogind(delay time.Duration) *fakeLogind {
	return &fakeLogind{delay: delay, events: make(chan bool), released: make(chan struct{}, 8)}
}

func (f *fakeLogind) InhibitDelay() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) Inhibit() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.inhibits++
	f.mu.Unlock()
	go func() {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
		f.released <- struct{}{}
	}()
	return w, nil
}

func (f *fakeLogind) RaiseInhibitDelay(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.raised, f.delay = d, d
	return nil
}

func (f *fakeLogind) PrepareForShutdown() (<-chan bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events, nil
}

// disconnect ends the bus connection as the manager sees it (its signal
// channel closes); the next connection gets a new one.
func (f *fakeLogind) disconnect() chan bool {
	f.mu.Lock()
	old := f.events
	f.events = make(chan bool)
	f.mu.Unlock()
	close(old)
	return f.events
}

func (f *fakeLogind) PreparingForShutdown() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.preparing, nil
}

func (f *fakeLogind) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeLogind) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inhibits
}

// stop is one Stop call: the pod, its grace period, the status it got, and
// the (fake) time.
type stop struct {
	pod    string
	grace  int64
	status v1.PodStatus
	at     time.Time
}

type fakeStopper struct {
	clk   *testclock.FakeClock
	calls chan stop
	// checks gets a value (if none is pending) at each Stopped call.
	checks  chan struct{}
	mu      sync.Mutex
	stopped map[types.UID]bool
}

func (s *fakeStopper) Stop(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	st := v1.PodStatus{Phase: v1.PodRunning}
	status(&st)
	s.calls <- stop{pod: pod.Name, grace: grace, status: st, at: s.clk.Now()}
}

func (s *fakeStopper) Stopped(uid types.UID) bool {
	select {
	case s.checks <- struct{}{}:
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped[uid]
}

func (s *fakeStopper) markStopped(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.stopped[types.UID(n)] = true
	}
}

func runningPod(name string, priority int32, grace int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{Priority: ptr.To(priority), TerminationGracePeriodSeconds: ptr.To(grace)}}
}

type harness struct {
	m       *Manager
	logind  *fakeLogind
	stopper *fakeStopper
	clk     *testclock.FakeClock
	changed chan bool
	// connects receives one value per connection to logind.
	connects chan struct{}
	state    string
	cancel   context.CancelFunc
	done     chan struct{}
}

// newHarness runs a Manager with two groups (regular 20 s, critical 10 s,
// as shutdownGracePeriod 30 s / critical 10 s) over pods.
func newHarness(t *testing.T, delay time.Duration, pods ...*v1.Pod) *harness {
	t.Helper()
	h := &harness{logind: newFakeLogind(delay), clk: testclock.NewFakeClock(time.Unix(1000, 0)), changed: make(chan bool, 8),
		state: filepath.Join(t.TempDir(), StateFile)}
	h.stopper = &fakeStopper{clk: h.clk, calls: make(chan stop, 8), checks: make(chan struct{}, 1), stopped: map[types.UID]bool{}}
	var err error
	h.connects = make(chan struct{}, 8)
	h.m, err = New(Config{
		Periods:    Periods(nil, 30*time.Second, 10*time.Second),
		Connect:    func() (Logind, error) { h.connects <- struct{}{}; return h.logind, nil },
		ActivePods: func() []*v1.Pod { return pods },
		Stopper:    h.stopper,
		Recorder:   record.NewFakeRecorder(16),
		StateFile:  h.state,
		Clock:      h.clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m.cfg.NodeChanged = func() { h.changed <- h.m.ShuttingDown() != nil }
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() { defer close(h.done); h.m.Run(ctx) }()
	t.Cleanup(func() { h.cancel(); <-h.done })
	return h
}

// next waits for the next Stop, stepping the fake clock by step each time
// the manager has checked the pods and waits again.
func (h *harness) next(t *testing.T, step time.Duration) stop {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-h.stopper.calls:
			return s
		case <-h.stopper.checks:
			h.clk.Step(step)
		case <-deadline:
			t.Fatal("no pod stopped")
			return stop{}
		}
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// started waits for the manager to take its lock and send the signal.
func (h *harness) signal(t *testing.T, shutdown bool) {
	t.Helper()
	h.logind.mu.Lock()
	events := h.logind.events
	h.logind.mu.Unlock()
	select {
	case events <- shutdown:
	case <-time.After(10 * time.Second):
		t.Fatal("the manager does not watch PrepareForShutdown")
	}
}

func TestNew(t *testing.T) {
	valid := Config{Periods: Periods(nil, time.Minute, 0), ActivePods: func() []*v1.Pod { return nil },
		Stopper: &fakeStopper{}, Recorder: record.NewFakeRecorder(1)}
	without := func(f func(*Config)) Config { c := valid; f(&c); return c }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "valid", Config: valid},
		{Name: "no periods", Config: without(func(c *Config) { c.Periods = nil }), WantErr: "Config.Periods"},
		{Name: "no pods", Config: without(func(c *Config) { c.ActivePods = nil }), WantErr: "Config.ActivePods"},
		{Name: "no stopper", Config: without(func(c *Config) { c.Stopper = nil }), WantErr: "Config.Stopper"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Config.Recorder"},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if m.cfg.PollPeriod != 100*time.Millisecond || m.cfg.ReconnectPeriod != time.Second {
			t.Errorf("periods %v %v", m.cfg.PollPeriod, m.cfg.ReconnectPeriod)
		}
	})
}

func TestShutdownStopsGroupsInOrder(t *testing.T) {
	h := newHarness(t, time.Hour,
		runningPod("critical", CriticalPriority, 30), runningPod("regular-long", 0, 120), runningPod("regular-short", 0, 5))
	h.signal(t, true)
	if !receive(t, h.changed, "node status change") {
		t.Fatal("NodeChanged called but not shutting down")
	}
	if r := h.m.Admit(t.Context(), admission.Attributes{Pod: runningPod("new", 0, 1)}); r.Admit || r.Reason != AdmissionReason || r.Message != AdmissionMessage {
		t.Errorf("admission %+v, want NodeShutdown", r)
	}
	if err := h.m.ShuttingDown(); err == nil || err.Error() != "node is shutting down" {
		t.Errorf("ShuttingDown %v", err)
	}
	start := h.clk.Now()
	got := map[string]stop{}
	for range 2 {
		s := receive(t, h.stopper.calls, "regular pod stopped")
		got[s.pod] = s
	}
	// Regular pods first, each with at most the group's 20 s.
	if got["regular-long"].grace != 20 || got["regular-short"].grace != 5 {
		t.Errorf("grace periods %+v", got)
	}
	st := got["regular-long"].status
	if st.Phase != v1.PodFailed || st.Reason != Reason || st.Message != Message || len(st.Conditions) != 1 ||
		st.Conditions[0].Type != v1.DisruptionTarget || st.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Errorf("status %+v", st)
	}
	h.stopper.markStopped("regular-long", "regular-short")
	c := h.next(t, 100*time.Millisecond)
	if c.pod != "critical" || c.grace != 10 {
		t.Errorf("then %+v, want critical with 10 s", c)
	}
	if c.at.Sub(start) >= 20*time.Second {
		t.Errorf("critical group started %v after the signal: regular pods that stopped should not wait their period", c.at.Sub(start))
	}
	h.stopper.markStopped("critical")
	// All stopped: the lock goes so the shutdown can proceed; the node
	// stays not ready.
	h.nextRelease(t)
	if h.m.ShuttingDown() == nil {
		t.Error("not shutting down after processing")
	}
	var s state
	b, err := os.ReadFile(h.state)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil || s.StartTime.IsZero() || s.EndTime.Before(s.StartTime) || s.EndTime.IsZero() {
		t.Errorf("state %s %v", b, err)
	}
}

// nextRelease waits for a lock to be let go, stepping the clock.
func (h *harness) nextRelease(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-h.logind.released:
			return
		default:
		}
		if h.clk.HasWaiters() {
			h.clk.Step(100 * time.Millisecond)
		}
		runtime.Gosched()
	}
	t.Fatal("the inhibitor lock was not released")
}

func TestShutdownGroupTimesOut(t *testing.T) {
	h := newHarness(t, time.Hour, runningPod("critical", CriticalPriority, 30), runningPod("stuck", 0, 120))
	h.signal(t, true)
	s := receive(t, h.stopper.calls, "regular pod stopped")
	if s.pod != "stuck" {
		t.Fatalf("first %s", s.pod)
	}
	start := s.at
	c := h.next(t, time.Second)
	if c.pod != "critical" || c.at.Sub(start) < 20*time.Second {
		t.Errorf("critical pod stopped %v after the regular one, want the regular group's 20 s", c.at.Sub(start))
	}
	// The critical pod never stops either: the lock goes after its 10 s.
	h.nextRelease(t)
	if d := h.clk.Since(c.at); d < 10*time.Second {
		t.Errorf("lock released %v after the critical group started, want 10 s", d)
	}
}

func TestShutdownCancelled(t *testing.T) {
	h := newHarness(t, time.Hour, runningPod("critical", CriticalPriority, 30), runningPod("regular", 0, 120))
	h.signal(t, true)
	receive(t, h.changed, "node status change")
	receive(t, h.stopper.calls, "regular pod stopped")
	h.signal(t, false)
	if receive(t, h.changed, "node status change") {
		t.Error("still shutting down after the cancellation")
	}
	if h.m.ShuttingDown() != nil || !h.m.Admit(t.Context(), admission.Attributes{Pod: runningPod("new", 0, 1)}).Admit {
		t.Error("node not back after the cancellation")
	}
	// Stepping well past both groups' periods stops nothing more.
	for range 40 {
		h.clk.Step(time.Second)
	}
	select {
	case s := <-h.stopper.calls:
		t.Errorf("%s stopped after the cancellation", s.pod)
	default:
	}
	// The lock is still held (never released): nothing to re-take.
	if n := h.logind.count(); n != 1 {
		t.Errorf("%d locks taken, want 1", n)
	}
	// A shutdown after a completed one re-takes the lock on cancellation.
	h.signal(t, true)
	receive(t, h.stopper.calls, "regular pod stopped")
	h.stopper.markStopped("regular", "critical")
	if c := h.next(t, 100*time.Millisecond); c.pod != "critical" {
		t.Errorf("then %s, want critical", c.pod)
	}
	h.nextRelease(t)
	h.signal(t, false)
	deadline := time.Now().Add(10 * time.Second)
	for h.logind.count() != 2 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := h.logind.count(); n != 2 {
		t.Errorf("%d locks taken after the second cancellation, want 2", n)
	}
}

func TestInhibitDelayRaised(t *testing.T) {
	h := newHarness(t, 5*time.Second)
	h.signal(t, false) // the watch is up: the delay was raised first
	h.logind.mu.Lock()
	defer h.logind.mu.Unlock()
	if h.logind.raised != 30*time.Second {
		t.Errorf("raised to %v, want 30s", h.logind.raised)
	}
}

type unreachable struct{ calls chan struct{} }

func TestWithoutLogindCarriesOn(t *testing.T) {
	u := unreachable{calls: make(chan struct{}, 8)}
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	m, err := New(Config{Periods: Periods(nil, time.Minute, 0), ActivePods: func() []*v1.Pod { return nil },
		Stopper: &fakeStopper{}, Recorder: record.NewFakeRecorder(1), Clock: clk,
		Connect: func() (Logind, error) { u.calls <- struct{}{}; return nil, errors.New("no system bus") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	receive(t, u.calls, "connection")
	// Tried again after a second, then two.
	for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
		for !clk.HasWaiters() {
			runtime.Gosched()
		}
		clk.Step(wait)
		receive(t, u.calls, "reconnection")
	}
	if m.ShuttingDown() != nil || !m.Admit(t.Context(), admission.Attributes{Pod: runningPod("p", 0, 1)}).Admit {
		t.Error("a node without logind refuses pods")
	}
	cancel()
	<-done
}

// reconnect ends the connection and waits for the next one, stepping the
// clock through the manager's wait.
func (h *harness) reconnect(t *testing.T) {
	t.Helper()
	for len(h.connects) > 0 {
		<-h.connects
	}
	h.logind.disconnect()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-h.connects:
			return
		default:
		}
		if h.clk.HasWaiters() {
			h.clk.Step(100 * time.Millisecond)
		}
		runtime.Gosched()
	}
	t.Fatal("no reconnection")
}

// A lost bus neither ends a shutdown under way nor lets go of the lock;
// a shutdown that began while disconnected is seen on reconnection
// (PreparingForShutdown).
func TestShutdownAcrossReconnection(t *testing.T) {
	h := newHarness(t, time.Hour, runningPod("critical", CriticalPriority, 30), runningPod("stuck", 0, 120))
	receive(t, h.connects, "connection")
	h.signal(t, true)
	if s := receive(t, h.stopper.calls, "regular pod stopped"); s.pod != "stuck" {
		t.Fatalf("first %s", s.pod)
	}
	h.reconnect(t)
	select {
	case <-h.logind.released:
		t.Fatal("the lock was let go with the connection")
	default:
	}
	if c := h.next(t, time.Second); c.pod != "critical" {
		t.Errorf("then %s, want the critical pod: the shutdown went on", c.pod)
	}
	h.stopper.markStopped("stuck", "critical")
	h.nextRelease(t)
	if n := h.logind.count(); n != 1 {
		t.Errorf("%d locks taken, want 1", n)
	}

	// Cancelled while disconnected: the node comes back on reconnection.
	h.logind.mu.Lock()
	h.logind.preparing = false
	h.logind.mu.Unlock()
	h.reconnect(t)
	deadline := time.Now().Add(10 * time.Second)
	for h.m.ShuttingDown() != nil && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if h.m.ShuttingDown() != nil {
		t.Error("still shutting down after a reconnection to a logind not preparing for one")
	}

	// Begun while disconnected: seen on reconnection.
	h.logind.mu.Lock()
	h.logind.preparing = true
	h.logind.mu.Unlock()
	h.stopper.mu.Lock()
	h.stopper.stopped = map[types.UID]bool{}
	h.stopper.mu.Unlock()
	h.reconnect(t)
	if s := receive(t, h.stopper.calls, "pod stopped after the reconnection"); s.pod != "stuck" {
		t.Errorf("first %s", s.pod)
	}
}
