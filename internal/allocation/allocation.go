package allocation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/allocation/state"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Retry triggers, upstream's (kubelet_pod_deferred_accepted_resizes_total's
// retry_trigger).
const (
	TriggerPodResized    = "pod_resized"
	TriggerPodUpdated    = "pod_updated"
	TriggerPodsAdded     = "pods_added"
	TriggerPodsRemoved   = "pods_removed"
	TriggerPodTerminated = "pod_terminated"
	triggerPeriodic      = "periodic_retry"
)

// Upstream's periodic retry of pending resizes: first after 30 s, then
// every 3 min.
const (
	initialRetryDelay = 30 * time.Second
	retryDelay        = 3 * time.Minute
)

// Config configures a Manager.
type Config struct {
	// Dir is the directory of the allocated_pods_state checkpoint (the
	// root directory); "" keeps allocations in memory.
	Dir string
	// Admit is the admission chain: a resize is admitted as a pod is, next
	// to the other pods' allocations (Operation resize). Required.
	Admit func(ctx context.Context, a admission.Attributes) admission.Result
	// Pod returns the desired pod (the pod manager's). Required.
	Pod func(uid types.UID) (*v1.Pod, bool)
	// Active are the admitted pods that count against the node's
	// resources. Required.
	Active func() []*v1.Pod
	// CPUManagerStatic: the CPU manager runs the static policy; a
	// Guaranteed pod's CPU resize is then Infeasible, as upstream.
	CPUManagerStatic bool
	// MemoryManagerStatic: the memory manager runs the Static policy; a
	// Guaranteed pod's memory resize is then Infeasible, as upstream.
	MemoryManagerStatic bool
	// SwapBehavior is a container's swap behaviour (cgroups.SwapBehavior
	// with the node's options); nil: no container has swap.
	SwapBehavior func(pod *v1.Pod, c *v1.Container) string
	// Recorder records the resize events. Required.
	Recorder record.EventRecorder
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Manager keeps the pods' allocations, pending resizes and resize
// conditions. Safe for concurrent use.
type Manager struct {
	cfg       Config
	allocated *state.State

	// mu serializes admissions and resize decisions (upstream's
	// allocationMutex).
	mu      sync.Mutex
	pending []types.UID
	// nextRetry is when pending resizes are retried without a trigger.
	nextRetry time.Time

	condMu sync.Mutex
	conds  map[types.UID]*resizeConditions
}

// New returns a Manager with the allocations of the checkpoint in
// cfg.Dir.
func New(cfg Config) (*Manager, error) {
	if cfg.Admit == nil || cfg.Pod == nil || cfg.Active == nil || cfg.Recorder == nil {
		return nil, errors.New("allocation: Config needs Admit, Pod, Active and Recorder")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	st, err := state.Open(cfg.Dir, state.AllocatedFile)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, allocated: st, conds: map[types.UID]*resizeConditions{},
		nextRetry: cfg.Clock.Now().Add(initialRetryDelay)}, nil
}

// UpdatePodFromAllocation returns pod with its containers' resources
// replaced by their allocation (a copy, only when they differ), and
// whether they differed.
func (m *Manager) UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool) {
	if pod == nil {
		return pod, false
	}
	info, ok := m.allocated.Pod(pod.UID)
	if !ok {
		return pod, false
	}
	return FromAllocation(pod, info)
}

// FromAllocation is pod with the resources of info (a copy when they
// differ), and whether they differed.
func FromAllocation(pod *v1.Pod, info state.PodResourceInfo) (*v1.Pod, bool) {
	updated := false
	if !apiequality.Semantic.DeepEqual(pod.Spec.Resources, info.PodLevelResources) {
		pod = pod.DeepCopy()
		pod.Spec.Resources = info.PodLevelResources.DeepCopy()
		updated = true
	}
	apply := func(cs []v1.Container, init bool) {
		for i := range cs {
			alloc, ok := info.ContainerResources[cs[i].Name]
			if !ok || apiequality.Semantic.DeepEqual(cs[i].Resources, alloc) {
				continue
			}
			if !updated {
				pod = pod.DeepCopy()
				updated = true
			}
			target := pod.Spec.Containers
			if init {
				target = pod.Spec.InitContainers
			}
			target[i].Resources = *alloc.DeepCopy()
		}
	}
	apply(pod.Spec.InitContainers, true)
	apply(pod.Spec.Containers, false)
	return pod, updated
}

// HasAllocation reports whether the pod was admitted (its resources
// allocated).
func (m *Manager) HasAllocation(uid types.UID) bool {
	_, ok := m.allocated.Pod(uid)
	return ok
}

// AllocatedPods are the pods that have an allocation, with it: what
// admission counts against the node (a pod without one is yet to be
// admitted, maybe refused), as upstream's getAllocatedPods.
func (m *Manager) AllocatedPods(pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if info, ok := m.allocated.Pod(p.UID); ok {
			ap, _ := FromAllocation(p, info)
			out = append(out, ap)
		}
	}
	return out
}

// AddPod admits a new pod as upstream's allocation manager: with the
// resources a checkpoint kept for it (a restart), next to the other pods'
// allocations; admitted, its resources are allocated. pending tells that
// its spec asks for other resources than those allocated (a resize the
// main loop then queues with PushPending).
func (m *Manager) AddPod(ctx context.Context, pod *v1.Pod, others []*v1.Pod) (r admission.Result, pending bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ap, pending := m.UpdatePodFromAllocation(pod)
	r = m.cfg.Admit(ctx, admission.Attributes{Pod: ap, OtherPods: m.AllocatedPods(others)})
	if !r.Admit {
		return r, false
	}
	if err := m.allocated.SetPod(ap.UID, state.InfoForPod(ap)); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot checkpoint the pod's allocation", "pod", klog.KObj(ap))
	}
	return r, pending
}

// RemovePod forgets a pod removed from its source.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) {
	if err := m.allocated.Remove(uid); err != nil {
		klog.FromContext(ctx).V(3).Info("Failed to delete pod allocation", "podUID", uid, "err", err)
	}
	m.condMu.Lock()
	delete(m.conds, uid)
	m.observeCountsLocked()
	m.condMu.Unlock()
}

// RemoveOrphans forgets the allocations of pods keep does not want.
func (m *Manager) RemoveOrphans(ctx context.Context, keep func(types.UID) bool) {
	if err := m.allocated.RemoveOrphans(keep); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot remove the allocations of removed pods")
	}
}

// PodUpdated is told of a new version of an admitted pod (old: the
// previous one): a change of its containers' resources is a resize,
// counted and queued; a resize reverted before it was allocated clears the
// pending condition. It returns the pods to sync again (resizes allocated
// or whose conditions changed).
func (m *Manager) PodUpdated(ctx context.Context, old, pod *v1.Pod) []*v1.Pod {
	if !m.HasAllocation(pod.UID) || old == nil {
		return nil
	}
	if !recordResizeOperations(old, pod) {
		return nil
	}
	if _, differs := m.UpdatePodFromAllocation(pod); !differs {
		m.clearPending(pod.UID, resolutionReverted)
		return []*v1.Pod{pod}
	}
	m.PushPending(ctx, pod.UID)
	return m.Retry(ctx, TriggerPodUpdated)
}

// PushPending queues a pod whose spec asks for other resources than
// allocated.
func (m *Manager) PushPending(ctx context.Context, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.Contains(m.pending, uid) {
		return
	}
	m.pending = append(m.pending, uid)
	m.sortPendingLocked(ctx)
}

// HasPending reports whether resizes wait.
func (m *Manager) HasPending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending) > 0
}

// RetryDue retries the pending resizes when the periodic retry is due
// (first 30 s after start, then every 3 min, as upstream), returning the
// pods to sync.
func (m *Manager) RetryDue(ctx context.Context) []*v1.Pod {
	m.mu.Lock()
	due := !m.cfg.Clock.Now().Before(m.nextRetry)
	m.mu.Unlock()
	if !due {
		return nil
	}
	synced := m.Retry(ctx, triggerPeriodic)
	for _, p := range synced {
		klog.FromContext(ctx).Info("Successfully retried resize after timeout", "pod", klog.KObj(p))
	}
	return synced
}

// Retry tries every pending resize again, in upstream's order (those not
// increasing requests first, then by priority, QoS and age); it returns
// the pods to sync: resizes allocated, or whose conditions changed.
func (m *Manager) Retry(ctx context.Context, trigger string) []*v1.Pod {
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextRetry = m.cfg.Clock.Now().Add(retryDelay)
	var still []types.UID
	var toSync []*v1.Pod
	for _, uid := range m.pending {
		pod, ok := m.cfg.Pod(uid)
		if !ok {
			logger.V(4).Info("Pod not found; removing from pending resizes", "podUID", uid)
			continue
		}
		before := m.Conditions(uid)
		wasDeferred := m.isPending(uid, v1.PodReasonDeferred)
		allocated, err := m.handleResize(ctx, pod)
		switch {
		case err != nil:
			logger.Error(err, "Failed to handle pod resources resize", "pod", klog.KObj(pod))
			still = append(still, uid)
		case m.isPending(uid, v1.PodReasonDeferred):
			logger.V(4).Info("Pod resize is deferred; will reevaluate later", "pod", klog.KObj(pod))
			still = append(still, uid)
		case m.isPending(uid, v1.PodReasonInfeasible):
			logger.V(4).Info("Pod resize is infeasible", "pod", klog.KObj(pod))
		default:
			if wasDeferred {
				metrics.PodDeferredAcceptedResizes.WithLabelValues(trigger).Inc()
			}
		}
		if allocated || !conditionsEqual(before, m.Conditions(uid)) {
			toSync = append(toSync, pod)
		}
	}
	m.pending = still
	return toSync
}

// handleResize allocates the pod's resize when it fits, else records why
// it is pending; mu held.
func (m *Manager) handleResize(ctx context.Context, pod *v1.Pod) (bool, error) {
	logger := klog.FromContext(ctx)
	allocatedPod, differs := m.UpdatePodFromAllocation(pod)
	if !differs {
		m.clearPending(pod.UID, resolutionReverted)
		return false, nil
	}
	r := m.admitResize(ctx, pod, allocatedPod)
	if r.Admit {
		if err := m.allocated.SetPod(pod.UID, state.InfoForPod(pod)); err != nil {
			return false, err
		}
		m.clearPending(pod.UID, resolutionAccepted)
		// A new resize: the in-progress condition starts again at this
		// generation, without an earlier resize's error.
		m.clearInProgress(pod.UID)
		m.setInProgress(pod.UID, "", "", pod.Generation)
		m.cfg.Recorder.Event(pod, v1.EventTypeNormal, EventResizeStarted, resizeMessage(logger, pod, pod.Generation, "", "Pod resize started"))
		return true, nil
	}
	if r.Reason != "" {
		if m.setPending(pod, r.Reason, r.Message) {
			reason := m.pendingReason(pod.UID)
			event := EventResizeDeferred
			if reason == v1.PodReasonInfeasible {
				event = EventResizeInfeasible
			}
			m.cfg.Recorder.Event(pod, v1.EventTypeWarning, event, resizeMessage(logger, pod, pod.Generation, r.Message, "Pod resize "+reason))
		}
	}
	return false, nil
}

// admitResize is upstream's resize admission: the resize handler's
// infeasible cases, then every admission handler with the other pods'
// allocations.
func (m *Manager) admitResize(ctx context.Context, pod, allocatedPod *v1.Pod) admission.Result {
	if !apiequality.Semantic.DeepEqual(pod.Spec.Resources, allocatedPod.Spec.Resources) {
		// InPlacePodLevelResourcesVerticalScaling: nodelet does not declare
		// it (the API server should not have sent this resize).
		metrics.PodInfeasibleResizes.WithLabelValues("plr_feature_gate_off").Inc()
		return admission.Result{Reason: v1.PodReasonInfeasible, Message: "In-place resize of pod-level resources (InPlacePodLevelResourcesVerticalScaling) is not supported by this node"}
	}
	if msg, ok := m.swapInfeasible(pod, allocatedPod); ok {
		metrics.PodInfeasibleResizes.WithLabelValues("swap_limitation").Inc()
		return admission.Result{Reason: v1.PodReasonInfeasible, Message: msg}
	}
	if guaranteed := podspec.QOSClass(pod) == v1.PodQOSGuaranteed; guaranteed && m.cfg.CPUManagerStatic && requestChanged(pod, allocatedPod, v1.ResourceCPU) {
		// As upstream without InPlacePodVerticalScalingExclusiveCPUs
		// (alpha, off): exclusive CPUs are not resized.
		metrics.PodInfeasibleResizes.WithLabelValues("guaranteed_pod_cpu_manager_static_policy").Inc()
		return admission.Result{Reason: v1.PodReasonInfeasible, Message: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}
	} else if guaranteed && m.cfg.MemoryManagerStatic && requestChanged(pod, allocatedPod, v1.ResourceMemory) {
		// As upstream without InPlacePodVerticalScalingExclusiveMemory
		// (alpha, off): pinned memory is not resized.
		metrics.PodInfeasibleResizes.WithLabelValues("guaranteed_pod_memory_manager_static_policy").Inc()
		return admission.Result{Reason: v1.PodReasonInfeasible, Message: `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"`}
	}
	others := slices.DeleteFunc(m.AllocatedPods(m.cfg.Active()), func(p *v1.Pod) bool { return p.UID == pod.UID })
	r := m.cfg.Admit(ctx, admission.Attributes{Pod: pod, OtherPods: others, Operation: admission.OperationResize})
	if !r.Admit {
		klog.FromContext(ctx).Info("Pod admission denied", "podUID", pod.UID, "pod", klog.KObj(pod), "reason", r.Reason, "message", r.Message, "operation", admission.OperationResize)
	}
	return r
}

// swapInfeasible is upstream's disallowResizeForSwappableContainers: a
// container's memory request may not change in place (without a restart)
// while it has swap, before or after.
func (m *Manager) swapInfeasible(desired, allocated *v1.Pod) (string, bool) {
	if m.cfg.SwapBehavior == nil {
		return "", false
	}
	restarts := func(c *v1.Container) bool {
		for _, p := range c.ResizePolicy {
			if p.ResourceName == v1.ResourceMemory {
				return p.RestartPolicy == v1.RestartContainer
			}
		}
		return false
	}
	alloc := containersByName(allocated)
	for _, cs := range [][]v1.Container{desired.Spec.Containers, desired.Spec.InitContainers} {
		for i := range cs {
			d := &cs[i]
			a, ok := alloc[d.Name]
			if !ok {
				continue
			}
			if d.Resources.Requests.Memory().Equal(*a.Resources.Requests.Memory()) || restarts(a) {
				continue
			}
			if swapped(m.cfg.SwapBehavior(desired, d)) || swapped(m.cfg.SwapBehavior(allocated, a)) {
				return "In-place resize of containers with swap is not supported.", true
			}
		}
	}
	return "", false
}

// containersByName are a pod's init and app containers by name.
func containersByName(pod *v1.Pod) map[string]*v1.Container {
	out := map[string]*v1.Container{}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			out[cs[i].Name] = &cs[i]
		}
	}
	return out
}

// requestChanged reports whether a container's request of name differs
// between the desired and the allocated pod (upstream's
// guaranteedPodResourceResizeRequired).
func requestChanged(desired, allocated *v1.Pod, name v1.ResourceName) bool {
	alloc := containersByName(allocated)
	for _, cs := range [][]v1.Container{desired.Spec.InitContainers, desired.Spec.Containers} {
		for i := range cs {
			if a, ok := alloc[cs[i].Name]; ok && !cs[i].Resources.Requests.Name(name, resource.DecimalSI).Equal(*a.Resources.Requests.Name(name, resource.DecimalSI)) {
				return true
			}
		}
	}
	return false
}

func swapped(behavior string) bool { return behavior != "" && behavior != "NoSwap" }

// sortPendingLocked orders the pending resizes as upstream: those not
// increasing requests first, then higher priority, then Guaranteed before
// Burstable, then the longest deferred; mu held.
func (m *Manager) sortPendingLocked(ctx context.Context) {
	var pods []*v1.Pod
	for _, uid := range m.pending {
		if p, ok := m.cfg.Pod(uid); ok {
			pods = append(pods, p)
		} else {
			klog.FromContext(ctx).V(4).Info("Pod not found; removing from pending resizes", "podUID", uid)
		}
	}
	priority := func(p *v1.Pod) int32 {
		if p.Spec.Priority != nil {
			return *p.Spec.Priority
		}
		return 0
	}
	since := func(p *v1.Pod) *time.Time {
		for _, c := range m.Conditions(p.UID) {
			if c.Type == v1.PodResizePending {
				t := c.LastTransitionTime.Time
				return &t
			}
		}
		return nil
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		ai, bi := m.increasesRequests(a), m.increasesRequests(b)
		switch {
		case !ai && bi:
			return -1
		case ai && !bi:
			return 1
		}
		if pa, pb := priority(a), priority(b); pa != pb {
			if pa > pb {
				return -1
			}
			return 1
		}
		qa, qb := podspec.QOSClass(a) == v1.PodQOSGuaranteed, podspec.QOSClass(b) == v1.PodQOSGuaranteed
		switch {
		case qa && !qb:
			return -1
		case qb && !qa:
			return 1
		}
		ta, tb := since(a), since(b)
		switch {
		case ta == nil && tb == nil:
			return 0
		case ta == nil:
			return 1
		case tb == nil:
			return -1
		}
		return ta.Compare(*tb)
	})
	m.pending = m.pending[:0]
	for _, p := range pods {
		m.pending = append(m.pending, p.UID)
	}
}

// increasesRequests reports whether the pod's resize raises its CPU or
// memory request.
func (m *Manager) increasesRequests(pod *v1.Pod) bool {
	allocated, differs := m.UpdatePodFromAllocation(pod)
	if !differs {
		return false
	}
	was := resourcehelper.PodRequests(allocated, resourcehelper.PodResourcesOptions{})
	now := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return now.Memory().Cmp(*was.Memory()) > 0 || now.Cpu().Cmp(*was.Cpu()) > 0
}
