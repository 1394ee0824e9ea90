package eviction

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
)

// DefaultMonitoringPeriod is how often the signals are observed, as
// upstream's eviction manager.
const DefaultMonitoringPeriod = 10 * time.Second

// Summarizer gives the stats summary (stats.Provider): the signals are node
// figures, read every period without listing the runtime; the pods' figures
// are read when a pod is to be chosen.
type Summarizer interface {
	NodeSummary(ctx context.Context) (*statsv1alpha1.Summary, error)
	Summary(ctx context.Context) (*statsv1alpha1.Summary, error)
	// DedicatedImageFs reports whether the runtime's images are on another
	// filesystem than the node's root directory.
	DedicatedImageFs(ctx context.Context) (bool, error)
}

// Evictor stops the pods the manager evicts (the pod workers).
type Evictor interface {
	// Evict stops the pod within grace seconds and reports it with status
	// applied; it does not wait.
	Evict(ctx context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus))
	// Reclaimed reports whether an evicted pod's containers and volumes
	// are gone.
	Reclaimed(uid types.UID) bool
}

// Reclaimer frees node-level resources before pods are evicted for disk
// pressure: dead containers (container GC), unused images (image GC).
type Reclaimer interface {
	Reclaim(ctx context.Context) error
}

const (
	// podCleanupTimeout and podCleanupPoll: how long, and how often, the
	// manager waits for an evicted pod's resources to be reclaimed before
	// observing again, as upstream.
	podCleanupTimeout = 30 * time.Second
	podCleanupPoll    = time.Second
	// immediateGracePeriod is an evicted pod's grace period for a hard
	// threshold or a local storage limit: upstream's 1 s.
	immediateGracePeriod = 1
)

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
	// Recorder and Node record the node's events (EvictionThresholdMet) and
	// the pods' (Evicted); Recorder is required.
	Recorder record.EventRecorder
	Node     *v1.ObjectReference
	// ActivePods are the pods admitted and not finished: the candidates.
	// Required with Evictor.
	ActivePods func() []*v1.Pod
	// Evictor stops the pods chosen; nil: the manager only reports
	// conditions.
	Evictor Evictor
	// MaxPodGracePeriod caps a pod's grace period for a soft threshold
	// (evictionMaxPodGracePeriod; 0 or less: the pod's own).
	MaxPodGracePeriod int64
	// NodeReclaim free node-level resources, in order, before pods are
	// evicted for disk pressure.
	NodeReclaim []Reclaimer
	// MemoryNotifiers, when set, wake the manager as soon as a memory
	// signal crosses its threshold: each is armed at the usage where its
	// signal (MemoryAvailable: the node's; AllocatableMemoryAvailable: the
	// pods' cgroup's) meets the threshold, and the signals are observed as
	// soon as one fires (NewMemcgNotifier on cgroup v1, NewPollNotifier on
	// v2).
	MemoryNotifiers map[Signal]MemoryNotifier
	// QuickSummary, when set, is read every QuickPeriod: the signals it
	// has (statfs of the node filesystem, the PID figures: a syscall or
	// two) are compared with their thresholds, and one newly met brings
	// the next observation forward (upstream waits for its period).
	QuickSummary func() (*statsv1alpha1.Summary, error)
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
	// dedicatedImageFs: known once asked successfully.
	dedicatedImageFs *bool
	// memory is the memory of the node and of the pods' cgroup at the
	// last observation, by signal (to arm the MemoryNotifiers).
	memory map[Signal]*statsv1alpha1.MemoryStats
}

// New returns a Manager for cfg.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Summary == nil:
		return nil, errors.New("eviction: Config.Summary is required")
	case cfg.Recorder == nil:
		return nil, errors.New("eviction: Config.Recorder is required")
	case cfg.Evictor != nil && cfg.ActivePods == nil:
		return nil, errors.New("eviction: Config.ActivePods is required with an Evictor")
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
func (m *Manager) Run(ctx context.Context) error {
	if len(m.cfg.Thresholds) == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	var ts []string
	for _, t := range m.cfg.Thresholds {
		ts = append(ts, t.String())
	}
	logger.Info("Watching eviction signals", "thresholds", ts, "period", m.cfg.MonitoringPeriod)
	tick := m.cfg.Clock.NewTicker(m.cfg.MonitoringPeriod)
	defer tick.Stop()
	fired := make(chan Signal, 1)
	for signal, n := range m.cfg.MemoryNotifiers {
		defer n.Close()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-n.Fired():
					select {
					case fired <- signal:
					default:
					}
				}
			}
		}()
	}
	// followUps: observations left, a second apart, after a crossing the
	// observation did not yet find a threshold met (the usage level counts
	// the page cache as it was at the last observation, and the kernel
	// tells a crossing once).
	followUps := 0
	var quick <-chan time.Time
	if m.cfg.QuickSummary != nil {
		t := m.cfg.Clock.NewTicker(QuickPeriod)
		defer t.Stop()
		quick = t.C()
	}
	for {
		if evicted := m.synchronize(ctx); len(evicted) > 0 {
			m.waitForCleanup(ctx, evicted)
		}
		m.armMemoryNotifiers(logger)
		var followUp <-chan time.Time
		if followUps > 0 && !slices.Contains(m.Conditions(), v1.NodeMemoryPressure) {
			followUps--
			followUp = m.cfg.Clock.After(memoryFollowUp)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C():
				followUps = 0
				break wait
			case signal := <-fired:
				logger.V(2).Info("Memory usage crossed a threshold level: observing the signals now", "signal", signal)
				followUps = int(m.cfg.MonitoringPeriod / memoryFollowUp)
				break wait
			case <-followUp:
				break wait
			case <-quick:
				if signal, ok := m.quickCrossed(logger); ok {
					logger.V(2).Info("A threshold is met between observations: observing the signals now", "signal", signal)
					break wait
				}
			}
		}
	}
}

// quickCrossed reads the quick signals and tells the first newly met.
func (m *Manager) quickCrossed(logger klog.Logger) (Signal, bool) {
	q, err := m.cfg.QuickSummary()
	if q == nil {
		logger.V(4).Info("Cannot read the quick signals", "err", err)
		return "", false
	}
	return NewlyMet(m.cfg.Thresholds, m.st.met, Observe(q))
}

// NewlyMet is the signal of the first threshold obs shows met that was not
// met at the last observation (met); signals obs lacks are left out.
func NewlyMet(thresholds, met []Threshold, obs Observations) (Signal, bool) {
	for _, t := range thresholds {
		if _, ok := obs[t.Signal]; ok && t.Met(obs, false) && !contains(met, t) {
			return t.Signal, true
		}
	}
	return "", false
}

// QuickPeriod is how often Config.QuickSummary is read.
const QuickPeriod = time.Second

// memoryFollowUp is how soon the signals are observed again after a
// memory threshold crossing that did not show as met yet.
const memoryFollowUp = time.Second

// armMemoryNotifiers arms each notifier at the next level of its signal's
// thresholds above the usage last observed (the highest one once all are
// crossed, to hear about the way back), as upstream refreshes its
// notifiers every period: the page cache moves the levels.
func (m *Manager) armMemoryNotifiers(logger klog.Logger) {
	for signal, n := range m.cfg.MemoryNotifiers {
		mem := m.memory[signal]
		if mem == nil || mem.UsageBytes == nil {
			continue
		}
		levels := MemoryLevels(m.cfg.Thresholds, signal, mem)
		if len(levels) == 0 {
			continue
		}
		level := levels[len(levels)-1]
		for _, l := range levels {
			if l > int64(*mem.UsageBytes) {
				level = l
				break
			}
		}
		if err := n.Arm(level); err != nil {
			logger.Error(err, "Cannot arm the memory threshold notification", "signal", signal)
		}
	}
}

// synchronize observes the signals once, updates the conditions and
// evicts at most one pod for a threshold met (or every pod over its local
// storage limits); it returns the pods evicted.
func (m *Manager) synchronize(ctx context.Context) []*v1.Pod {
	logger := klog.FromContext(ctx)
	sum, err := m.cfg.Summary.NodeSummary(ctx)
	if err != nil {
		logger.Error(err, "Cannot observe the eviction signals")
		return nil
	}
	obs := Observe(sum)
	m.memory = map[Signal]*statsv1alpha1.MemoryStats{MemoryAvailable: sum.Node.Memory}
	for _, c := range sum.Node.SystemContainers {
		if c.Name == statsv1alpha1.SystemContainerPods {
			m.memory[AllocatableMemoryAvailable] = c.Memory
		}
	}
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
	if m.cfg.Evictor == nil {
		if len(d.act) > 0 {
			m.thresholdMet(logger, d.act[0], obs)
		}
		return nil
	}
	active := m.cfg.ActivePods()
	var limited bool
	for _, p := range active {
		limited = limited || HasLocalStorageLimits(p)
	}
	if len(d.act) == 0 && !limited {
		return nil
	}
	dedicated, err := m.dedicatedImageFsOnce(ctx)
	if err != nil {
		logger.Error(err, "Cannot tell whether the images have a filesystem of their own")
	}
	var stats PodStats
	if limited {
		if stats, err = m.podStats(ctx); err != nil {
			logger.Error(err, "Cannot read the pods' stats")
			return nil
		}
		if evicted := m.localStorageEviction(ctx, active, stats, dedicated); len(evicted) > 0 {
			return evicted
		}
	}
	if len(d.act) == 0 {
		return nil
	}
	t := d.act[0]
	m.thresholdMet(logger, t, obs)
	if m.reclaimNodeLevel(ctx, t) {
		return nil
	}
	logger.Info("Must evict a pod to reclaim", "resource", t.Signal.Resource())
	if stats == nil {
		if stats, err = m.podStats(ctx); err != nil {
			logger.Error(err, "Cannot read the pods' stats")
			return nil
		}
	}
	candidates := slices.Clone(active)
	Rank(candidates, t.Signal, stats, dedicated)
	logger.Info("Pods ranked for eviction", "pods", klog.KObjSlice(candidates))
	for _, t := range d.act {
		if o, ok := obs[t.Signal]; ok && !o.Time.IsZero() {
			metrics.EvictionStatsAge.WithLabelValues(string(t.Signal)).Observe(m.cfg.Clock.Since(o.Time).Seconds())
		}
	}
	for _, p := range candidates {
		if !evictable(p) {
			continue
		}
		grace := int64(immediateGracePeriod)
		if !t.Hard() {
			grace = podGracePeriod(p, m.cfg.MaxPodGracePeriod)
		}
		ps, found := stats(p)
		msg, ann := Message(t, obs[t.Signal], p, ps, found)
		cond := &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: msg,
			ObservedGeneration: p.Generation}
		m.evict(ctx, p, grace, msg, ann, cond)
		metrics.Evictions.WithLabelValues(string(t.Signal)).Inc()
		return []*v1.Pod{p}
	}
	logger.Info("Unable to evict any pod from the node")
	return nil
}

// thresholdMet logs and records that the node reclaims for t.
func (m *Manager) thresholdMet(logger klog.Logger, t Threshold, obs Observations) {
	o := obs[t.Signal]
	logger.Info("Eviction threshold met", "threshold", t.String(), "available", o.Available.String(), "capacity", o.Capacity.String())
	if m.cfg.Node != nil {
		m.cfg.Recorder.Eventf(m.cfg.Node, v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", t.Signal.Resource())
	}
}

// podGracePeriod is an evicted pod's grace period for a soft threshold:
// its own, capped by max.
func podGracePeriod(p *v1.Pod, max int64) int64 {
	own := int64(v1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		own = *p.Spec.TerminationGracePeriodSeconds
	}
	if max > 0 && own > max {
		return max
	}
	return own
}

func (m *Manager) dedicatedImageFsOnce(ctx context.Context) (bool, error) {
	if m.dedicatedImageFs != nil {
		return *m.dedicatedImageFs, nil
	}
	d, err := m.cfg.Summary.DedicatedImageFs(ctx)
	if err != nil {
		return false, err
	}
	m.dedicatedImageFs = &d
	return d, nil
}

func (m *Manager) podStats(ctx context.Context) (PodStats, error) {
	sum, err := m.cfg.Summary.Summary(ctx)
	if err != nil {
		return nil, err
	}
	return StatsOf(sum), nil
}

// localStorageEviction evicts the pods over their local storage limits.
func (m *Manager) localStorageEviction(ctx context.Context, active []*v1.Pod, stats PodStats, dedicated bool) []*v1.Pod {
	var evicted []*v1.Pod
	for _, p := range active {
		ps, ok := stats(p)
		if !ok || !evictable(p) {
			continue
		}
		if v, over := CheckLocalStorage(p, ps, dedicated); over {
			m.evict(ctx, p, immediateGracePeriod, v.Message, nil, nil)
			metrics.Evictions.WithLabelValues(v.Signal).Inc()
			evicted = append(evicted, p)
		}
	}
	return evicted
}

// reclaimNodeLevel frees node-level resources for a disk threshold (dead
// containers, then unused images) and reports whether that resolved the
// disk thresholds (minimum reclaim included), as upstream.
func (m *Manager) reclaimNodeLevel(ctx context.Context, t Threshold) bool {
	if t.Signal.Condition() != v1.NodeDiskPressure || len(m.cfg.NodeReclaim) == 0 {
		return false
	}
	// With the images on a filesystem of their own, nothing the collectors
	// free is on the node's (upstream reclaims nothing for nodefs then).
	if d := m.dedicatedImageFs; d != nil && *d && (t.Signal == NodeFsAvailable || t.Signal == NodeFsInodesFree) {
		return false
	}
	logger := klog.FromContext(ctx)
	for _, r := range m.cfg.NodeReclaim {
		if err := r.Reclaim(ctx); err != nil {
			logger.Error(err, "Node-level reclaim failed", "resource", t.Signal.Resource())
		}
	}
	sum, err := m.cfg.Summary.NodeSummary(ctx)
	if err != nil {
		logger.Error(err, "Cannot observe the eviction signals after reclaiming")
		return false
	}
	obs := Observe(sum)
	for _, th := range m.cfg.Thresholds {
		if th.Signal.Condition() == v1.NodeDiskPressure && th.Met(obs, true) {
			return false
		}
	}
	logger.Info("Reduced the pressure without evicting pods", "resource", t.Signal.Resource())
	return true
}

// evict records the eviction and asks the Evictor to stop the pod: phase
// Failed, reason Evicted, the message, and cond when set.
func (m *Manager) evict(ctx context.Context, p *v1.Pod, grace int64, msg string, ann map[string]string, cond *v1.PodCondition) {
	klog.FromContext(ctx).Info("Evicting pod", "pod", klog.KObj(p), "podUID", p.UID, "gracePeriod", grace, "message", msg)
	m.cfg.Recorder.AnnotatedEventf(p, ann, v1.EventTypeWarning, ReasonEvicted, "%s", msg)
	now := metav1.NewTime(m.cfg.Clock.Now())
	m.cfg.Evictor.Evict(ctx, p, grace, func(st *v1.PodStatus) {
		st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonEvicted, msg
		if cond == nil {
			return
		}
		c := *cond
		c.LastTransitionTime = now
		podspec.SetCondition(st, c)
	})
}

// waitForCleanup waits until the evicted pods' resources are reclaimed, up
// to podCleanupTimeout, as upstream, so the next observation sees what the
// eviction freed.
func (m *Manager) waitForCleanup(ctx context.Context, pods []*v1.Pod) {
	timeout := m.cfg.Clock.NewTimer(podCleanupTimeout)
	defer timeout.Stop()
	tick := m.cfg.Clock.NewTicker(podCleanupPoll)
	defer tick.Stop()
	for {
		done := true
		for _, p := range pods {
			done = done && m.cfg.Evictor.Reclaimed(p.UID)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-timeout.C():
			klog.FromContext(ctx).Info("Evicted pods are not cleaned up yet; observing again", "pods", klog.KObjSlice(pods))
			return
		case <-tick.C():
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
func (m *Manager) Admit(ctx context.Context, a admission.Attributes) admission.Result {
	return Admit(klog.FromContext(ctx), m.Conditions(), a.Pod)
}
