package eviction

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
)

// DefaultMonitoringPeriod is how often the signals are observed, as
// upstream's eviction manager.
const DefaultMonitoringPeriod = 10 * time.Second

// Summarizer gives the node's part of the stats summary (stats.Provider):
// the signals are node figures, read without listing the runtime.
type Summarizer interface {
	NodeSummary(ctx context.Context) (*statsv1alpha1.Summary, error)
}

// Config configures a Manager.
type Config struct {
	// Thresholds are the hard and soft thresholds (ParseThresholds).
	Thresholds []Threshold
	// PressureTransitionPeriod is how long a pressure condition stays after
	// its signal is back above the threshold
	// (evictionPressureTransitionPeriod).
	PressureTransitionPeriod time.Duration
	// MonitoringPeriod defaults to DefaultMonitoringPeriod.
	MonitoringPeriod time.Duration
	// Summary is required.
	Summary Summarizer
	// Recorder and Node record the node's events (EvictionThresholdMet);
	// Recorder is required.
	Recorder record.EventRecorder
	Node     *v1.ObjectReference
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Manager observes the eviction signals every MonitoringPeriod and keeps the
// node's pressure conditions; it admits new pods under them.
type Manager struct {
	cfg     Config
	changed chan struct{}

	mu         sync.RWMutex
	conditions []v1.NodeConditionType
	// Owned by Run.
	st state
}

// New returns a Manager for cfg.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Summary == nil:
		return nil, errors.New("eviction: Config.Summary is required")
	case cfg.Recorder == nil:
		return nil, errors.New("eviction: Config.Recorder is required")
	}
	if cfg.MonitoringPeriod <= 0 {
		cfg.MonitoringPeriod = DefaultMonitoringPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, changed: make(chan struct{}, 1)}, nil
}

// Run observes the signals until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if len(m.cfg.Thresholds) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	var ts []string
	for _, t := range m.cfg.Thresholds {
		ts = append(ts, t.String())
	}
	logger.Info("Watching eviction signals", "thresholds", ts, "period", m.cfg.MonitoringPeriod)
	tick := m.cfg.Clock.NewTicker(m.cfg.MonitoringPeriod)
	defer tick.Stop()
	for {
		m.synchronize(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// synchronize observes the signals once and updates the conditions.
func (m *Manager) synchronize(ctx context.Context) {
	logger := klog.FromContext(ctx)
	sum, err := m.cfg.Summary.NodeSummary(ctx)
	if err != nil {
		logger.Error(err, "Cannot observe the eviction signals")
		return
	}
	obs := Observe(sum)
	next, d := m.st.update(m.cfg.Thresholds, obs, m.cfg.Clock.Now(), m.cfg.PressureTransitionPeriod)
	m.st = next
	m.mu.Lock()
	changed := !slices.Equal(m.conditions, d.conditions)
	m.conditions = d.conditions
	m.mu.Unlock()
	if changed {
		logger.Info("Node pressure conditions changed", "conditions", d.conditions)
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}
	if len(d.act) > 0 {
		t := d.act[0]
		o := obs[t.Signal]
		logger.Info("Eviction threshold met", "threshold", t.String(), "available", o.Available.String(), "capacity", o.Capacity.String())
		if m.cfg.Node != nil {
			m.cfg.Recorder.Eventf(m.cfg.Node, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", t.Signal.Resource())
		}
	}
}

// Conditions returns the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure) that hold now.
func (m *Manager) Conditions() []v1.NodeConditionType {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.conditions)
}

// Changed is signalled when the conditions change, so the node status is
// reported at once.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// Admit decides whether pod may start under the current conditions.
func (m *Manager) Admit(logger klog.Logger, pod *v1.Pod) admission.Result {
	return Admit(logger, m.Conditions(), pod)
}
