package prober

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/metrics"
)

// newManager is New for tests: it fails the test on an error.
func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no runner", Config: Config{}, WantErr: "Config.Runner is required"},
		{Name: "a nil clock is the real one", Config: Config{Runner: &Runner{}}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.clock)
	})
}

func waitResult(t *testing.T, m *Manager, id string, kind Kind, want Result, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.Result(id, kind) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s result of %s: %v, want %v", kind, id, m.Result(id, kind), want)
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWorkersApplyThresholds(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	clk := testingclock.NewFakeClock(time.Now())
	m := newManager(t, Config{Runner: &Runner{Runtime: rt}, Clock: clk})
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "uid-1"
	c := &v1.Container{Name: "c",
		LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 2, TimeoutSeconds: 1},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Sync(ctx, pod, "10.0.0.1", []Container{{Spec: c, ID: "cid", StartedAt: clk.Now()}})

	// Readiness starts unready and needs two successes.
	if m.Ready("cid", true) {
		t.Fatal("ready before any probe")
	}
	waitResult(t, m, "cid", Readiness, Success, clk)
	waitResult(t, m, "cid", Liveness, Success, clk)
	if why, _ := m.Unhealthy("cid"); !m.Ready("cid", true) || why != "" {
		t.Fatalf("ready %v unhealthy %q after passing probes", m.Ready("cid", true), why)
	}
	if got := testutil.ToFloat64(metrics.ProbeTotal.WithLabelValues("Liveness", "successful", "c", "p", "ns", "uid-1")); got < 1 {
		t.Errorf("prober_probe_total successful = %v", got)
	}

	// Failures: readiness after one, liveness after three.
	for i := 0; i < 10; i++ {
		rt.InjectError("ExecSync", errors.New("exit status 1"))
	}
	waitResult(t, m, "cid", Readiness, Failure, clk)
	waitResult(t, m, "cid", Liveness, Failure, clk)
	if got, _ := m.Unhealthy("cid"); got != "Container c failed liveness probe, will be restarted" {
		t.Errorf("unhealthy: %q", got)
	}

	// A container that stops running loses its workers and results.
	m.Sync(ctx, pod, "10.0.0.1", nil)
	if why, _ := m.Unhealthy("cid"); m.Result("cid", Liveness) != Unknown || why != "" {
		t.Error("results kept for a stopped container")
	}
}

func TestStartupHoldsBackLiveness(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	clk := testingclock.NewFakeClock(time.Now())
	m := newManager(t, Config{Runner: &Runner{Runtime: rt}, Clock: clk})
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p2", "ns", "uid-2"
	probe := func(th int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, PeriodSeconds: 1, FailureThreshold: th, SuccessThreshold: 1, TimeoutSeconds: 1}
	}
	c := &v1.Container{Name: "c", StartupProbe: probe(30), LivenessProbe: probe(1)}
	for i := 0; i < 5; i++ {
		rt.InjectError("ExecSync", errors.New("not yet"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Sync(ctx, pod, "10.0.0.2", []Container{{Spec: c, ID: "cid2", StartedAt: clk.Now()}})
	if m.Started("cid2") {
		t.Fatal("started before the startup probe passed")
	}
	waitResult(t, m, "cid2", Startup, Success, clk)
	if why, _ := m.Unhealthy("cid2"); m.Result("cid2", Liveness) == Failure || why != "" {
		t.Errorf("liveness judged while the startup probe had not passed")
	}
	if !m.Started("cid2") {
		t.Error("not started after the startup probe passed")
	}
}

// A readiness probe runs as soon as the startup probe passes, not a
// readiness period later (upstream's "should be ready immediately after
// startupProbe succeeds").
func TestStartupSuccessTriggersReadiness(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	clk := testingclock.NewFakeClock(time.Now())
	m := newManager(t, Config{Runner: &Runner{Runtime: rt}, Clock: clk})
	m.jitter = func(n int64) int64 { return n - 1 } // the longest first delay
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p3", "ns", "uid-3"
	probe := func(period int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, PeriodSeconds: period, FailureThreshold: 30, SuccessThreshold: 1, TimeoutSeconds: 1}
	}
	// Readiness every 60 s: its first scheduled run is 6 s in.
	c := &v1.Container{Name: "c", StartupProbe: probe(1), ReadinessProbe: probe(60)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Sync(ctx, pod, "10.0.0.3", []Container{{Spec: c, ID: "cid3", StartedAt: clk.Now()}})
	start := clk.Now()
	deadline := time.Now().Add(5 * time.Second)
	for m.Result("cid3", Startup) != Success {
		if time.Now().After(deadline) {
			t.Fatal("startup probe never passed")
		}
		if clk.HasWaiters() && clk.Since(start) < 3*time.Second {
			clk.Step(100 * time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// No more clock steps: only the trigger can run the readiness probe.
	deadline = time.Now().Add(3 * time.Second)
	for !m.Ready("cid3", true) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready %v after the startup probe passed (fake time %v)", time.Since(deadline.Add(-3*time.Second)), clk.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
