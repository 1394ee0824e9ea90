package prober

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

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

// The tests of the workers run in a synctest bubble, on the real clock,
// which is the bubble's fake one: time.Sleep moves it on, and after
// synctest.Wait every worker waits for its next run, so each result is
// checked at a known time, after the workers did all they would do.

// wantResult fails t unless the container's probe of kind has result want.
func wantResult(t *testing.T, m *Manager, id string, kind Kind, want Result, when string) {
	t.Helper()
	if got := m.Result(id, kind); got != want {
		t.Fatalf("%s: %s result of %s %v, want %v", when, kind, id, got, want)
	}
}

// newTestManager is newManager on the bubble's clock, with no jitter: the
// first runs are at once (or after the initial delay).
func newTestManager(t *testing.T, rt *critest.FakeRuntimeService) *Manager {
	m := newManager(t, Config{Runner: &Runner{Runtime: rt}})
	m.jitter = func(int64) int64 { return 0 }
	return m
}

// probeDurations is the sample count of a prober_probe_duration_seconds
// series.
func probeDurations(t *testing.T, kind Kind, container, pod, ns string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.ProbeDuration.WithLabelValues(string(kind), container, pod, ns).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestWorkersApplyThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := critest.NewFakeRuntimeService()
		m := newTestManager(t, rt)
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p", "ns", "uid-1"
		c := &v1.Container{Name: "c",
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 2, TimeoutSeconds: 1},
		}
		ctx := t.Context()
		m.Sync(ctx, pod, "10.0.0.1", []Container{{Spec: c, ID: "cid", StartedAt: time.Now()}})

		// Readiness starts unready and needs two successes.
		if m.Ready("cid", true) {
			t.Fatal("ready before any probe")
		}
		synctest.Wait()
		wantResult(t, m, "cid", Liveness, Success, "after the first probes")
		wantResult(t, m, "cid", Readiness, Failure, "after one readiness success of two")
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid", Readiness, Success, "after two readiness successes")
		if why, _ := m.Unhealthy("cid"); !m.Ready("cid", true) || why != "" {
			t.Fatalf("ready %v unhealthy %q after passing probes", m.Ready("cid", true), why)
		}
		if got := testutil.ToFloat64(metrics.ProbeTotal.WithLabelValues("Liveness", "successful", "c", "p", "ns", "uid-1")); got != 2 {
			t.Errorf("prober_probe_total successful = %v, want 2", got)
		}
		if got := probeDurations(t, Liveness, "c", "p", "ns"); got != 2 {
			t.Errorf("prober_probe_duration_seconds count = %v, want 2", got)
		}

		// Failures: readiness after one, liveness after three.
		for i := 0; i < 10; i++ {
			rt.InjectError("ExecSync", errors.New("exit status 1"))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid", Readiness, Failure, "after one readiness failure")
		wantResult(t, m, "cid", Liveness, Success, "after one liveness failure of three")
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid", Liveness, Success, "after two liveness failures of three")
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid", Liveness, Failure, "after three liveness failures")
		if got, _ := m.Unhealthy("cid"); got != "Container c failed liveness probe, will be restarted" {
			t.Errorf("unhealthy: %q", got)
		}
		// Failed probes are counted, but their duration is not observed
		// (upstream's doProbe observes successful probes only).
		for _, kind := range []Kind{Liveness, Readiness} {
			if got := testutil.ToFloat64(metrics.ProbeTotal.WithLabelValues(string(kind), "failed", "c", "p", "ns", "uid-1")); got != 3 {
				t.Errorf("%s prober_probe_total failed = %v, want 3", kind, got)
			}
			if got := probeDurations(t, kind, "c", "p", "ns"); got != 2 {
				t.Errorf("%s prober_probe_duration_seconds count = %v after 2 successes and 3 failures, want 2", kind, got)
			}
		}

		// A container that stops running loses its workers and results.
		m.Sync(ctx, pod, "10.0.0.1", nil)
		if why, _ := m.Unhealthy("cid"); m.Result("cid", Liveness) != Unknown || why != "" {
			t.Error("results kept for a stopped container")
		}
	})
}

func TestStartupHoldsBackLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := critest.NewFakeRuntimeService()
		m := newTestManager(t, rt)
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p2", "ns", "uid-2"
		probe := func(th int32) *v1.Probe {
			return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, PeriodSeconds: 1, FailureThreshold: th, SuccessThreshold: 1, TimeoutSeconds: 1}
		}
		c := &v1.Container{Name: "c", StartupProbe: probe(30), LivenessProbe: probe(1)}
		// The startup probe fails at 0..4 s and passes at 5 s. Had the
		// liveness probe run meanwhile, it would have taken some of these
		// failures and failed at once (its threshold is 1).
		for i := 0; i < 5; i++ {
			rt.InjectError("ExecSync", errors.New("not yet"))
		}
		m.Sync(t.Context(), pod, "10.0.0.2", []Container{{Spec: c, ID: "cid2", StartedAt: time.Now()}})
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if m.Started("cid2") {
			t.Fatal("started before the startup probe passed")
		}
		wantResult(t, m, "cid2", Liveness, Unknown, "while the startup probe fails")
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid2", Startup, Success, "at the sixth startup probe")
		if why, _ := m.Unhealthy("cid2"); m.Result("cid2", Liveness) == Failure || why != "" {
			t.Errorf("liveness judged while the startup probe had not passed")
		}
		if !m.Started("cid2") {
			t.Error("not started after the startup probe passed")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid2", Liveness, Success, "a period after the startup probe passed")
	})
}

// A readiness probe runs as soon as the startup probe passes, not a
// readiness period later (upstream's "should be ready immediately after
// startupProbe succeeds").
func TestStartupSuccessTriggersReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := critest.NewFakeRuntimeService()
		m := newManager(t, Config{Runner: &Runner{Runtime: rt}})
		m.jitter = func(n int64) int64 { return n - 1 } // the longest first delay
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p3", "ns", "uid-3"
		probe := func(period int32) *v1.Probe {
			return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, PeriodSeconds: period, FailureThreshold: 30, SuccessThreshold: 1, TimeoutSeconds: 1}
		}
		// Startup every second: its first run is 0.1 s in. Readiness every
		// 60 s: its first scheduled run is 6 s in.
		c := &v1.Container{Name: "c", StartupProbe: probe(1), ReadinessProbe: probe(60)}
		m.Sync(t.Context(), pod, "10.0.0.3", []Container{{Spec: c, ID: "cid3", StartedAt: time.Now()}})
		time.Sleep(time.Second)
		synctest.Wait()
		wantResult(t, m, "cid3", Startup, Success, "a second in")
		if !m.Ready("cid3", true) {
			t.Fatal("not ready a second in, 0.9 s after the startup probe passed")
		}
	})
}
