package shutdown

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/ctortest"
)

// The tests of Run run in a synctest bubble, on the real clock, which is
// the bubble's fake one: time passes only when every goroutine waits, so a
// test blocked on a channel lets the manager's timers fire in order, and
// after synctest.Wait the manager waits for something, so "nothing
// stopped" and "the lock is still held" are facts, not the outcome of a
// sleep.

// fakeLogind is logind as the manager sees it: locks are pipes whose read
// end sees EOF once the manager lets go, as logind's.
type fakeLogind struct {
	mu     sync.Mutex
	delay  time.Duration
	raised time.Duration
	events chan bool
	locks  []*os.File // the read ends of the locks taken
	closed bool
	// preparing is the PreparingForShutdown property.
	preparing bool
}

func newFakeLogind(t *testing.T, delay time.Duration) *fakeLogind {
	f := &fakeLogind{delay: delay, events: make(chan bool)}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.locks {
			r.Close()
		}
	})
	return f
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
	f.locks = append(f.locks, r)
	f.mu.Unlock()
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

// count is the number of locks taken.
func (f *fakeLogind) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.locks)
}

// held is the number of locks the manager has not let go.
func (f *fakeLogind) held(t *testing.T) int {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.locks {
		if !eof(t, r) {
			n++
		}
	}
	return n
}

// eof tells, without waiting, whether the pipe's write end is closed: a
// read of the (non-blocking) read end then gives EOF, else EAGAIN. Nothing
// is ever written to a lock.
func eof(t *testing.T, r *os.File) bool {
	t.Helper()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) { n, rerr = syscall.Read(int(fd), make([]byte, 1)) }); err != nil {
		t.Fatal(err)
	}
	switch {
	case rerr == nil && n == 0:
		return true
	case errors.Is(rerr, syscall.EAGAIN):
		return false
	default:
		t.Fatalf("reading a lock's pipe: %d bytes, %v", n, rerr)
		return false
	}
}

// stop is one Stop call: the pod, its grace period, the status it got, and
// the (bubble's) time.
type stop struct {
	pod    string
	grace  int64
	status v1.PodStatus
	at     time.Time
}

type fakeStopper struct {
	calls   chan stop
	mu      sync.Mutex
	stopped map[types.UID]bool
}

func (s *fakeStopper) Stop(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	st := v1.PodStatus{Phase: v1.PodRunning}
	status(&st)
	s.calls <- stop{pod: pod.Name, grace: grace, status: st, at: time.Now()}
}

func (s *fakeStopper) Stopped(uid types.UID) bool {
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
	changed chan bool
	// connects receives one value per connection to logind.
	connects chan struct{}
	state    string
}

// newHarness runs a Manager with two groups (regular 20 s, critical 10 s,
// as shutdownGracePeriod 30 s / critical 10 s) over pods. Call it in a
// synctest bubble.
func newHarness(t *testing.T, delay time.Duration, pods ...*v1.Pod) *harness {
	t.Helper()
	h := &harness{logind: newFakeLogind(t, delay), changed: make(chan bool, 8),
		state: filepath.Join(t.TempDir(), StateFile)}
	h.stopper = &fakeStopper{calls: make(chan stop, 8), stopped: map[types.UID]bool{}}
	var err error
	h.connects = make(chan struct{}, 8)
	h.m, err = New(Config{
		Periods:    Periods(nil, 30*time.Second, 10*time.Second),
		Connect:    func() (Logind, error) { h.connects <- struct{}{}; return h.logind, nil },
		ActivePods: func() []*v1.Pod { return pods },
		Stopper:    h.stopper,
		Recorder:   record.NewFakeRecorder(16),
		StateFile:  h.state,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m.cfg.NodeChanged = func() { h.changed <- h.m.ShuttingDown() != nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// receive waits for a value on ch, for a minute of the bubble's time at
// most: the manager's timers fire meanwhile.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// nothing checks that ch holds no value, once the manager waits.
func nothing[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		t.Fatalf("%s: %v", what, v)
	default:
	}
}

// signal sends logind's PrepareForShutdown(shutdown).
func (h *harness) signal(t *testing.T, shutdown bool) {
	t.Helper()
	h.logind.mu.Lock()
	events := h.logind.events
	h.logind.mu.Unlock()
	select {
	case events <- shutdown:
	case <-time.After(time.Minute):
		t.Fatal("the manager does not watch PrepareForShutdown")
	}
}

// released tells whether the manager let go of every lock, once it waits.
func (h *harness) released(t *testing.T) bool {
	t.Helper()
	synctest.Wait()
	return h.logind.held(t) == 0
}

// reconnect ends the connection and waits for the next one (a
// ReconnectPeriod later) and for the manager to handle it.
func (h *harness) reconnect(t *testing.T) {
	t.Helper()
	for len(h.connects) > 0 {
		<-h.connects
	}
	h.logind.disconnect()
	receive(t, h.connects, "reconnection")
	synctest.Wait()
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
	synctest.Test(t, func(t *testing.T) {
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
		start := time.Now()
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
		nothing(t, h.stopper.calls, "the critical pod stopped while the regular ones ran")
		h.stopper.markStopped("regular-long", "regular-short")
		c := receive(t, h.stopper.calls, "critical pod stopped")
		if c.pod != "critical" || c.grace != 10 {
			t.Errorf("then %+v, want critical with 10 s", c)
		}
		// Seen at the next check of the pods, not at the group's end.
		if d := c.at.Sub(start); d != h.m.cfg.PollPeriod {
			t.Errorf("critical group started %v after the signal, want the poll period: regular pods that stopped should not wait their period", d)
		}
		// All stopped: the lock goes so the shutdown can proceed, at the
		// next check; the node stays not ready.
		if h.released(t) {
			t.Fatal("the lock was let go before the critical pod was seen stopped")
		}
		h.stopper.markStopped("critical")
		time.Sleep(h.m.cfg.PollPeriod)
		if !h.released(t) {
			t.Fatal("the inhibitor lock was not released once every pod stopped")
		}
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
	})
}

func TestShutdownGroupTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, time.Hour, runningPod("critical", CriticalPriority, 30), runningPod("stuck", 0, 120))
		h.signal(t, true)
		s := receive(t, h.stopper.calls, "regular pod stopped")
		if s.pod != "stuck" {
			t.Fatalf("first %s", s.pod)
		}
		c := receive(t, h.stopper.calls, "critical pod stopped")
		if c.pod != "critical" || c.at.Sub(s.at) != 20*time.Second {
			t.Errorf("%s stopped %v after the regular one, want the critical pod after the regular group's 20 s", c.pod, c.at.Sub(s.at))
		}
		// The critical pod never stops either: the lock goes after its 10 s.
		time.Sleep(10*time.Second - time.Millisecond)
		if h.released(t) {
			t.Fatal("lock released before the critical group's 10 s")
		}
		time.Sleep(time.Millisecond)
		if !h.released(t) {
			t.Fatal("lock not released after the critical group's 10 s")
		}
	})
}

func TestShutdownCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		// Well past both groups' periods, nothing more is stopped.
		time.Sleep(40 * time.Second)
		nothing(t, h.stopper.calls, "a pod stopped after the cancellation")
		// The lock is still held (never released): nothing to re-take.
		if n, held := h.logind.count(), h.logind.held(t); n != 1 || held != 1 {
			t.Errorf("%d locks taken, %d held; want 1, 1", n, held)
		}
		// A shutdown after a completed one re-takes the lock on cancellation.
		h.signal(t, true)
		receive(t, h.stopper.calls, "regular pod stopped")
		h.stopper.markStopped("regular", "critical")
		if c := receive(t, h.stopper.calls, "critical pod stopped"); c.pod != "critical" {
			t.Errorf("then %s, want critical", c.pod)
		}
		if !h.released(t) {
			t.Fatal("the inhibitor lock was not released once every pod stopped")
		}
		h.signal(t, false)
		synctest.Wait()
		if n, held := h.logind.count(), h.logind.held(t); n != 2 || held != 1 {
			t.Errorf("%d locks taken, %d held after the second cancellation; want 2, 1", n, held)
		}
	})
}

func TestInhibitDelayRaised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 5*time.Second)
		h.signal(t, false) // the watch is up: the delay was raised first
		h.logind.mu.Lock()
		defer h.logind.mu.Unlock()
		if h.logind.raised != 30*time.Second {
			t.Errorf("raised to %v, want 30s", h.logind.raised)
		}
	})
}

func TestWithoutLogindCarriesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := make(chan time.Time, 8)
		m, err := New(Config{Periods: Periods(nil, time.Minute, 0), ActivePods: func() []*v1.Pod { return nil },
			Stopper: &fakeStopper{}, Recorder: record.NewFakeRecorder(1),
			Connect: func() (Logind, error) { calls <- time.Now(); return nil, errors.New("no system bus") }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		last := receive(t, calls, "connection")
		// Tried again after a second, then two.
		for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
			at := receive(t, calls, "reconnection")
			if d := at.Sub(last); d != wait {
				t.Errorf("reconnected after %v, want %v", d, wait)
			}
			last = at
		}
		if m.ShuttingDown() != nil || !m.Admit(t.Context(), admission.Attributes{Pod: runningPod("p", 0, 1)}).Admit {
			t.Error("a node without logind refuses pods")
		}
		cancel()
		<-done
	})
}

// A lost bus neither ends a shutdown under way nor lets go of the lock;
// a shutdown that began while disconnected is seen on reconnection
// (PreparingForShutdown).
func TestShutdownAcrossReconnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, time.Hour, runningPod("critical", CriticalPriority, 30), runningPod("stuck", 0, 120))
		receive(t, h.connects, "connection")
		h.signal(t, true)
		s := receive(t, h.stopper.calls, "regular pod stopped")
		if s.pod != "stuck" {
			t.Fatalf("first %s", s.pod)
		}
		h.reconnect(t)
		if h.released(t) {
			t.Fatal("the lock was let go with the connection")
		}
		h.stopper.markStopped("critical") // it stops as soon as asked
		if c := receive(t, h.stopper.calls, "critical pod stopped"); c.pod != "critical" || c.at.Sub(s.at) != 20*time.Second {
			t.Errorf("then %s after %v, want the critical pod after the regular group's 20 s: the shutdown went on", c.pod, c.at.Sub(s.at))
		}
		if !h.released(t) {
			t.Fatal("the inhibitor lock was not released once every pod stopped")
		}
		if n := h.logind.count(); n != 1 {
			t.Errorf("%d locks taken, want 1", n)
		}

		// Cancelled while disconnected: the node comes back on reconnection.
		h.logind.mu.Lock()
		h.logind.preparing = false
		h.logind.mu.Unlock()
		h.reconnect(t)
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
	})
}
