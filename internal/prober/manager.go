package prober

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Kind is a probe kind.
type Kind string

const (
	Liveness  Kind = "Liveness"
	Readiness Kind = "Readiness"
	Startup   Kind = "Startup"
)

// Result is a probe worker's verdict after the thresholds.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

// Manager runs the probe workers and keeps their results.
type Manager struct {
	runner   *Runner
	recorder record.EventRecorder
	clock    clock.Clock
	updates  chan types.UID
	// jitter returns a random duration in [0, n) nanoseconds (rand.Int64N;
	// tests fix it).
	jitter func(n int64) int64

	mu      sync.Mutex
	workers map[workerKey]*worker
	results map[resultKey]Result
}

type workerKey struct {
	containerID string
	kind        Kind
}

type resultKey = workerKey

// Config configures a Manager.
type Config struct {
	// Runner runs the probes.
	Runner *Runner
	// Recorder gets the probe events (Unhealthy, ProbeWarning); nil
	// records none.
	Recorder record.EventRecorder
	// Clock times the probes (the real clock when nil).
	Clock clock.Clock
}

// New returns a Manager for cfg. It fails when cfg has no Runner.
func New(cfg Config) (*Manager, error) {
	if cfg.Runner == nil {
		return nil, errors.New("prober: Config.Runner is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{runner: cfg.Runner, recorder: cfg.Recorder, clock: cfg.Clock, updates: make(chan types.UID, 1000), jitter: rand.Int64N,
		workers: map[workerKey]*worker{}, results: map[resultKey]Result{}}, nil
}

// Updates carries the UIDs of pods whose probe results changed.
func (m *Manager) Updates() <-chan types.UID { return m.updates }

// Container is a running container to probe.
type Container struct {
	Spec      *v1.Container
	ID        string
	StartedAt time.Time
}

// Sync makes the workers match the pod's running containers: new workers
// for containers with probes that have none, and stops the workers of
// containers no longer running. It is cheap when nothing changed.
func (m *Manager) Sync(ctx context.Context, pod *v1.Pod, podIP string, running []Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := map[string]bool{}
	for _, c := range running {
		live[c.ID] = true
		for kind, p := range map[Kind]*v1.Probe{Liveness: c.Spec.LivenessProbe, Readiness: c.Spec.ReadinessProbe, Startup: c.Spec.StartupProbe} {
			if p == nil {
				continue
			}
			k := workerKey{c.ID, kind}
			if m.workers[k] != nil {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			w := &worker{m: m, key: k, pod: pod, probe: p, cancel: cancel, trigger: make(chan struct{}, 1),
				target: Target{Pod: pod, Container: c.Spec, ContainerID: c.ID, PodIP: podIP}, startedAt: c.StartedAt}
			m.workers[k] = w
			if kind == Readiness {
				m.results[k] = Failure // not ready until a probe passes
			}
			go w.run(wctx)
		}
	}
	for k, w := range m.workers {
		if w.pod.UID == pod.UID && !live[k.containerID] {
			w.cancel()
			w.forget()
			delete(m.workers, k)
			delete(m.results, k)
		}
	}
}

// RemovePod stops every worker of the pod.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if w.pod.UID == uid {
			w.cancel()
			w.forget()
			delete(m.workers, k)
			delete(m.results, k)
		}
	}
}

// Result returns a container's result for a probe kind.
func (m *Manager) Result(containerID string, kind Kind) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[resultKey{containerID, kind}]
}

// set records a result and announces a change.
func (m *Manager) set(k resultKey, uid types.UID, r Result) {
	m.mu.Lock()
	if _, ok := m.workers[k]; !ok {
		m.mu.Unlock()
		return // stopped meanwhile
	}
	old := m.results[k]
	m.results[k] = r
	if k.kind == Startup && r == Success {
		// Readiness is probed at once when the startup probe passes, as
		// upstream, instead of a readiness period later.
		if w := m.workers[workerKey{k.containerID, Readiness}]; w != nil {
			w.runNow()
		}
	}
	m.mu.Unlock()
	if old != r {
		select {
		case m.updates <- uid:
		default:
		}
	}
}

// Unhealthy implements kuberuntime.ProbeResults: why a running container
// must be restarted (a failed liveness or startup probe), or "", with the
// probe's own terminationGracePeriodSeconds if set.
func (m *Manager) Unhealthy(containerID string) (string, *int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, kind := range []Kind{Liveness, Startup} {
		k := resultKey{containerID, kind}
		if w := m.workers[k]; w != nil && m.results[k] == Failure {
			return fmt.Sprintf("Container %s failed %s probe, will be restarted", w.target.Container.Name, strings.ToLower(string(kind))),
				w.probe.TerminationGracePeriodSeconds
		}
	}
	return "", nil
}

// Ready reports whether a running container passes its readiness probe
// (true without one) and its startup probe.
func (m *Manager) Ready(containerID string, hasReadinessProbe bool) bool {
	if !m.started(containerID) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := resultKey{containerID, Readiness}
	if _, ok := m.workers[k]; !ok {
		return !hasReadinessProbe
	}
	return m.results[k] == Success
}

// Started reports whether the container's startup probe passed (true
// without one).
func (m *Manager) Started(containerID string) bool { return m.started(containerID) }

// started reports whether the container's startup probe (if any) passed.
func (m *Manager) started(containerID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := resultKey{containerID, Startup}
	if _, has := m.workers[k]; !has {
		return true
	}
	return m.results[k] == Success
}

type worker struct {
	m         *Manager
	key       workerKey
	pod       *v1.Pod
	probe     *v1.Probe
	target    Target
	startedAt time.Time
	cancel    context.CancelFunc
	// trigger asks for a run now, ahead of the period (buffered, one).
	trigger chan struct{}
}

// runNow asks the worker to probe at once; it never blocks.
func (w *worker) runNow() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

func (w *worker) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(w.pod), "container", w.target.Container.Name, "probe", w.key.kind)
	period := time.Duration(w.probe.PeriodSeconds) * time.Second
	// First run: initialDelaySeconds after the container started. Workers
	// of containers that have run for a while (adopted after a nodelet
	// restart) start at a random point of their first period, so that
	// they do not all probe in lock step.
	// Fresh containers get a small jitter too (a tenth of a period), so
	// pods started together drift apart without delaying readiness much.
	delay := max(time.Duration(w.probe.InitialDelaySeconds)*time.Second-w.m.clock.Since(w.startedAt), 0)
	if w.m.clock.Since(w.startedAt) > period {
		delay += time.Duration(w.m.jitter(int64(period) + 1))
	} else {
		delay += time.Duration(w.m.jitter(int64(period)/10 + 1))
	}
	successes, failures := 0, 0
	last := Unknown
	timer := w.m.clock.NewTimer(delay)
	defer timer.Stop()
	due := w.m.clock.Now().Add(delay)
	initialDelay := time.Duration(w.probe.InitialDelaySeconds) * time.Second
	for {
		triggered := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-w.trigger:
			triggered = true
		}
		now := w.m.clock.Now()
		if triggered {
			// An extra run: the period's schedule stays, and the initial
			// delay still holds (as upstream's doProbe).
			if now.Sub(w.startedAt) < initialDelay {
				continue
			}
		} else {
			if late := now.Sub(due); late > period {
				logger.V(2).Info("Probe ran late", "late", late.Round(time.Millisecond), "period", period)
			}
			due = now.Add(period)
			timer.Reset(period)
		}
		if w.key.kind != Startup && !w.m.started(w.key.containerID) {
			continue // startup probes hold the others back
		}
		began := w.m.clock.Now()
		out, err := w.m.runner.Probe(ctx, w.target, w.probe)
		if ctx.Err() != nil {
			return
		}
		took := w.m.clock.Since(began)
		var warning Warning
		if errors.As(err, &warning) {
			if w.m.recorder != nil {
				w.m.recorder.Event(podspec.ContainerRef(w.pod, w.target.Container), v1.EventTypeWarning, "ProbeWarning",
					fmt.Sprintf("%s probe warning: %s", w.key.kind, warning))
			}
			err = nil // it passed
		}
		w.record(err, took)
		logger.V(4).Info("Probe ran", "ok", err == nil, "took", took.Round(time.Millisecond))
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			msg := fmt.Sprintf("%s probe failed: %v", w.key.kind, err)
			if out != "" {
				msg += ": " + out
			}
			if w.m.recorder != nil {
				w.m.recorder.Event(podspec.ContainerRef(w.pod, w.target.Container), v1.EventTypeWarning, "Unhealthy", msg)
			}
			logger.V(2).Info("Probe failed", "err", err, "output", out)
		}
		result := last
		switch {
		case successes >= int(w.probe.SuccessThreshold) || (successes > 0 && w.key.kind != Readiness):
			result = Success
		case failures >= int(w.probe.FailureThreshold):
			result = Failure
		}
		if result != last {
			last = result
			w.m.set(w.key, w.pod.UID, result)
		}
		if w.key.kind == Startup && result == Success {
			return // a startup probe is done once it succeeded
		}
	}
}

// record counts a probe run in the prober_* metrics. As upstream's
// doProbe, the duration is observed only for a successful probe.
func (w *worker) record(err error, took time.Duration) {
	kind := string(w.key.kind) // "Liveness", "Readiness", "Startup" as upstream
	c, p := w.target.Container.Name, w.pod
	if err != nil {
		metrics.ProbeTotal.WithLabelValues(kind, "failed", c, p.Name, p.Namespace, string(p.UID)).Inc()
		return
	}
	metrics.ProbeTotal.WithLabelValues(kind, "successful", c, p.Name, p.Namespace, string(p.UID)).Inc()
	metrics.ProbeDuration.WithLabelValues(kind, c, p.Name, p.Namespace).Observe(took.Seconds())
}

// forget drops the worker's metric series when its container is gone.
func (w *worker) forget() {
	kind := string(w.key.kind) // "Liveness", "Readiness", "Startup" as upstream
	c, p := w.target.Container.Name, w.pod
	for _, result := range []string{"successful", "failed"} {
		metrics.ProbeTotal.DeleteLabelValues(kind, result, c, p.Name, p.Namespace, string(p.UID))
	}
	metrics.ProbeDuration.DeleteLabelValues(kind, c, p.Name, p.Namespace)
}
