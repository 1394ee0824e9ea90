package allocation

import (
	"context"
	"encoding/json"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

// The resize events' reasons, upstream's.
const (
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeStarted    = "ResizeStarted"
	EventResizeError      = "ResizeError"
)

// How a deferred resize ended (kubelet_pod_deferred_resize_duration_seconds).
const (
	resolutionAccepted = "accepted"
	resolutionReverted = "reverted"
)

// resizeConditions are a pod's resize conditions (upstream's status
// manager keeps them the same way).
type resizeConditions struct {
	pending, inProgress *v1.PodCondition
}

// Conditions are the pod's PodResizePending and PodResizeInProgress
// conditions (copies), in that order, for its status.
func (m *Manager) Conditions(uid types.UID) []v1.PodCondition {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	c := m.conds[uid]
	if c == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, p := range []*v1.PodCondition{c.pending, c.inProgress} {
		if p != nil {
			out = append(out, *p.DeepCopy())
		}
	}
	return out
}

func conditionsEqual(a, b []v1.PodCondition) bool { return apiequality.Semantic.DeepEqual(a, b) }

// updated is upstream's updatedPodResizeCondition: the transition time
// kept while the reason is the same.
func (m *Manager) updated(t v1.PodConditionType, old *v1.PodCondition, reason, message string, generation int64) *v1.PodCondition {
	now := metav1.NewTime(m.cfg.Clock.Now())
	transition := now
	if old != nil && old.Reason == reason {
		transition = old.LastTransitionTime
	}
	return &v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastProbeTime: now, LastTransitionTime: transition,
		ObservedGeneration: generation, Reason: reason, Message: message}
}

func (m *Manager) entryLocked(uid types.UID) *resizeConditions {
	c := m.conds[uid]
	if c == nil {
		c = &resizeConditions{}
		m.conds[uid] = c
	}
	return c
}

// setPending records why the pod's resize waits: Infeasible, or Deferred
// for any other reason, as upstream. It reports whether the reason or
// generation changed (an event is due).
func (m *Manager) setPending(pod *v1.Pod, reason, message string) bool {
	if reason != v1.PodReasonInfeasible {
		reason = v1.PodReasonDeferred
	}
	m.condMu.Lock()
	defer m.condMu.Unlock()
	c := m.entryLocked(pod.UID)
	old := c.pending
	c.pending = m.updated(v1.PodResizePending, old, reason, message, pod.Generation)
	m.observeCountsLocked()
	return old == nil || old.Reason != reason || old.ObservedGeneration != pod.Generation
}

func (m *Manager) pendingReason(uid types.UID) string {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	if c := m.conds[uid]; c != nil && c.pending != nil {
		return c.pending.Reason
	}
	return ""
}

func (m *Manager) isPending(uid types.UID, reason string) bool { return m.pendingReason(uid) == reason }

// clearPending drops the pod's pending condition; a deferred one's wait is
// observed with how it ended.
func (m *Manager) clearPending(uid types.UID, resolution string) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	c := m.conds[uid]
	if c == nil || c.pending == nil {
		return
	}
	if c.pending.Reason == v1.PodReasonDeferred && !c.pending.LastTransitionTime.IsZero() {
		pod, _ := m.cfg.Pod(uid)
		metrics.PodDeferredResizeDurationSeconds.WithLabelValues(resolution, priorityBucket(pod)).
			Observe(m.cfg.Clock.Since(c.pending.LastTransitionTime.Time).Seconds())
	}
	c.pending = nil
	m.observeCountsLocked()
}

// setInProgress sets the in-progress condition, as upstream: an existing
// one keeps its generation, and its reason and message unless new ones are
// given. It returns the condition's generation and whether it changed.
func (m *Manager) setInProgress(uid types.UID, reason, message string, generation int64) (int64, bool) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	c := m.entryLocked(uid)
	old := c.inProgress
	if old != nil {
		if reason == "" && message == "" {
			reason, message = old.Reason, old.Message
		}
		generation = old.ObservedGeneration
	}
	c.inProgress = m.updated(v1.PodResizeInProgress, old, reason, message, generation)
	m.observeCountsLocked()
	if old == nil {
		return generation, true
	}
	return generation, old.Reason != reason || old.Message != message || old.ObservedGeneration != generation
}

// clearInProgress drops the in-progress condition, returning its
// generation and whether there was one.
func (m *Manager) clearInProgress(uid types.UID) (int64, bool) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	c := m.conds[uid]
	if c == nil || c.inProgress == nil {
		return 0, false
	}
	g := c.inProgress.ObservedGeneration
	c.inProgress = nil
	m.observeCountsLocked()
	return g, true
}

// Backfill takes a pod's resize conditions from its API status (a
// restart), as upstream's BackfillPodResizeConditions.
func (m *Manager) Backfill(pod *v1.Pod) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case v1.PodResizePending:
			m.entryLocked(pod.UID).pending = m.updated(c.Type, nil, c.Reason, c.Message, c.ObservedGeneration)
		case v1.PodResizeInProgress:
			m.entryLocked(pod.UID).inProgress = m.updated(c.Type, nil, c.Reason, c.Message, c.ObservedGeneration)
		}
	}
	m.observeCountsLocked()
}

// ObserveSync is told by a pod's sync, after the runtime was synced with
// allocatedPod, whether a resize is still in progress (allocated resources
// not yet actuated) and the resize's error if actuating it failed: the
// in-progress condition is set (with reason Error and the message on a
// failure) or cleared, with upstream's events.
func (m *Manager) ObserveSync(ctx context.Context, allocatedPod *v1.Pod, inProgress bool, resizeErr string) {
	logger := klog.FromContext(ctx)
	switch {
	case resizeErr != "":
		if g, changed := m.setInProgress(allocatedPod.UID, v1.PodReasonError, resizeErr, allocatedPod.Generation); changed {
			m.cfg.Recorder.Event(allocatedPod, v1.EventTypeWarning, EventResizeError, resizeMessage(logger, allocatedPod, g, resizeErr, "Pod resize error"))
		}
	case inProgress:
		m.setInProgress(allocatedPod.UID, "", "", allocatedPod.Generation)
	default:
		if g, cleared := m.clearInProgress(allocatedPod.UID); cleared {
			m.cfg.Recorder.Event(allocatedPod, v1.EventTypeNormal, EventResizeCompleted, resizeMessage(logger, allocatedPod, g, "", "Pod resize completed"))
		}
	}
}

// observeCountsLocked sets kubelet_pod_pending_resizes and
// kubelet_pod_in_progress_resizes; condMu held.
func (m *Manager) observeCountsLocked() {
	type key struct{ reason, bucket string }
	pending := map[key]int{}
	inProgress := 0
	for uid, c := range m.conds {
		if c.inProgress != nil {
			inProgress++
		}
		if c.pending != nil {
			pod, ok := m.cfg.Pod(uid)
			if !ok {
				continue
			}
			pending[key{strings.ToLower(c.pending.Reason), priorityBucket(pod)}]++
		}
	}
	metrics.PodPendingResizes.Reset()
	for k, n := range pending {
		metrics.PodPendingResizes.WithLabelValues(k.reason, k.bucket).Set(float64(n))
	}
	metrics.PodInProgressResizes.Set(float64(inProgress))
}

// priorityBucket is upstream's GetPriorityBucketLabel.
func priorityBucket(pod *v1.Pod) string {
	if pod == nil {
		return "unknown"
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority == 0 {
		return "normal"
	}
	switch p := *pod.Spec.Priority; {
	case p >= podspec.SystemCriticalPriority:
		return "system-critical"
	case p >= 100000:
		return "high"
	case p > 0:
		return "medium"
	case p > -1000:
		return "low"
	default:
		return "very-low"
	}
}

type containerAllocation struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources,omitempty"`
}

type resourceSummary struct {
	InitContainers []containerAllocation `json:"initContainers,omitempty"`
	Containers     []containerAllocation `json:"containers,omitempty"`
	Generation     int64                 `json:"generation"`
	Error          string                `json:"error,omitempty"`
}

// resizeMessage is upstream's resize event message: the prefix, then the
// containers' resources, the generation and the error as JSON.
func resizeMessage(logger klog.Logger, pod *v1.Pod, generation int64, errMsg, prefix string) string {
	s := resourceSummary{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerAllocation{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, containerAllocation{c.Name, c.Resources})
	}
	raw, err := json.Marshal(s)
	if err != nil {
		logger.Error(err, "Failed to serialize resource summary", "pod", klog.KObj(pod))
		return prefix
	}
	return prefix + ": " + string(raw)
}
