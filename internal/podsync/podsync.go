package podsync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/status"
	"github.com/nodelet/nodelet/internal/tracing"
)

// Runtime is what a pod's sync asks of the container runtime
// (kuberuntime.Manager).
type Runtime interface {
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubecontainer.PodStatus, error)
	// GetPodStatusNewerThan may answer from the last relist when it began
	// after t.
	GetPodStatusNewerThan(ctx context.Context, uid types.UID, name, namespace string, t time.Time) (*kubecontainer.PodStatus, error)
	SyncPod(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, env kuberuntime.PodEnv) (kubecontainer.SyncResult, error)
	KillPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, gracePeriod *int64) error
	RemovePod(ctx context.Context, running *kubecontainer.RunningPod) error
	// ResizeInProgress reports whether a running container of the
	// allocated pod has not been given its allocated resources yet.
	ResizeInProgress(allocatedPod *v1.Pod, rs *kubecontainer.PodStatus) bool
}

// Resizes are the pods' allocated resources and resize conditions
// (allocation.Manager).
type Resizes interface {
	// UpdatePodFromAllocation is pod with its allocated resources.
	UpdatePodFromAllocation(pod *v1.Pod) (*v1.Pod, bool)
	// Conditions are the pod's PodResizePending and PodResizeInProgress
	// conditions.
	Conditions(uid types.UID) []v1.PodCondition
	// ObserveSync is told, after a sync, whether the allocated pod's
	// resize is still in progress and why actuating it failed, if it did.
	ObserveSync(ctx context.Context, allocatedPod *v1.Pod, inProgress bool, resizeErr string)
}

// Volumes sets up and tears down the host side of a pod's volumes
// (volumes.Manager).
type Volumes interface {
	// Setup returns the host paths of the pod's volumes by name.
	Setup(ctx context.Context, pod *v1.Pod) (map[string]string, error)
	Teardown(uid types.UID) error
}

// Prober runs the probes of a pod's running containers (prober.Manager) and
// answers from their results.
type Prober interface {
	kuberuntime.ProbeResults
	status.Probes
	// Sync starts the probes of running containers and stops the others';
	// the probe workers live until ctx ends or the pod is removed.
	Sync(ctx context.Context, pod *v1.Pod, podIP string, running []prober.Container)
	RemovePod(uid types.UID)
}

// Statuses holds the pods' computed API statuses (status.Store).
type Statuses interface {
	Get(uid types.UID) (v1.PodStatus, bool)
	Set(ctx context.Context, pod *v1.Pod, st v1.PodStatus)
	Delete(uid types.UID)
	// MarkDirty has the pod's status written again (a terminal phase the
	// writer held).
	MarkDirty(uid types.UID)
}

// Mirrors keeps static pods' mirror pods in the API (mirror.Manager).
type Mirrors interface {
	Ensure(ctx context.Context, static *v1.Pod) error
	Delete(ctx context.Context, static *v1.Pod) error
}

// Finisher writes a deleted pod's final status and deletes it for good
// (status.Syncer).
type Finisher interface {
	Finish(ctx context.Context, pod *v1.Pod, final v1.PodStatus) error
}

// Cgroups removes a terminated pod's cgroups (cgroups.Manager).
type Cgroups interface {
	RemovePod(ctx context.Context, uid types.UID) error
}

// Images forgets a removed pod's pull back-off (images.Puller).
type Images interface {
	Forget(pod *v1.Pod)
}

// Objects forgets the ConfigMaps and Secrets a removed pod referenced
// (volumes.APIGetter).
type Objects interface {
	Forget(uid types.UID)
}

// AllocatedResources reports the health of the devices assigned to the
// pod's containers in their statuses' allocatedResourcesStatus (the device
// manager; gate ResourceHealthStatus).
type AllocatedResources interface {
	UpdateAllocatedResourcesStatus(pod *v1.Pod, status *v1.PodStatus)
}

// DynamicResources releases what the DRA drivers prepared for a pod.
type DynamicResources interface {
	UnprepareResources(ctx context.Context, pod *v1.Pod) error
	PodMightNeedToUnprepareResources(uid types.UID) bool
}

// Config configures a Syncer. Mirrors, Finisher and Objects are nil on a
// node without an API server.
type Config struct {
	Runtime  Runtime
	Volumes  Volumes
	Prober   Prober
	Statuses Statuses
	Cgroups  Cgroups
	Images   Images
	Recorder record.EventRecorder

	Mirrors  Mirrors
	Finisher Finisher
	Objects  Objects
	// DRA unprepares a stopped pod's ResourceClaims (dra.Manager); nil:
	// no dynamic resources.
	DRA DynamicResources
	// AllocatedResources fills the containers' allocatedResourcesStatus;
	// nil: none.
	AllocatedResources AllocatedResources
	// Resizes are the pods' allocations: a pod is synced with its
	// allocated resources (what admission accepted), its in-place resizes
	// reported in its conditions. nil: a pod runs with its spec's.
	Resizes Resizes

	// ProbeContext is the context the probe workers run in: the agent's,
	// since they outlive the sync that starts them.
	ProbeContext context.Context
	// HostIPs are the node's IPs (host-network pods' IPs, status.hostIPs).
	HostIPs []string
	// RuntimeName prefixes container IDs in the status ("containerd://").
	RuntimeName string
	// SupportsRRO reports whether the pod's runtime handler makes
	// recursive read-only mounts (kuberuntime.Manager.SupportsRRO), for
	// the containers' volumeMounts statuses; nil: never.
	SupportsRRO func(ctx context.Context, pod *v1.Pod) bool
	// Tracer records the syncPod, syncTerminatingPod and
	// syncTerminatedPod spans (tracing); nil records none.
	Tracer trace.Tracer
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Syncer brings one pod at a time to its spec: it implements
// podworkers.Syncer. Its methods are called by the pod's worker, never
// concurrently for one pod; Redundant is called by the main loop.
type Syncer struct {
	cfg    Config
	clock  clock.PassiveClock
	tracer trace.Tracer
	// firstSeen is when a pod was first synced, until it runs: for
	// kubelet_pod_start_duration_seconds.
	firstSeen sync.Map // types.UID -> time.Time
	// observed: what each pod's last sync saw, to drop PLEG events that
	// report nothing new.
	observed observed
	// synced: when each pod's last sync ended (types.UID -> time.Time):
	// the next sync's runtime status need only be newer.
	synced sync.Map
	// evictions: the pods the eviction manager stops (see Evict).
	evictions sync.Map // types.UID -> *eviction
}

// New returns a Syncer; every collaborator but Mirrors, Finisher and Objects
// is required.
func New(cfg Config) (*Syncer, error) {
	var missing []string
	for name, v := range map[string]any{
		"Runtime": cfg.Runtime, "Volumes": cfg.Volumes, "Prober": cfg.Prober, "Statuses": cfg.Statuses,
		"Cgroups": cfg.Cgroups, "Images": cfg.Images, "Recorder": cfg.Recorder, "ProbeContext": cfg.ProbeContext,
	} {
		if v == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("podsync: Config.%v required", missing)
	}
	s := &Syncer{cfg: cfg, clock: cfg.Clock, tracer: cfg.Tracer}
	if s.tracer == nil {
		s.tracer = tracing.Noop()
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	return s, nil
}

// Redundant tells whether the pod's last sync already saw what the PLEG
// event e reports (see observed): the main loop then does not wake the pod's
// worker.
func (s *Syncer) Redundant(e *pleg.Event) bool { return s.observed.redundant(e) }

// SyncPod implements podworkers.Syncer: it brings one pod to its spec and
// records its status. It returns when it wants the next sync at the latest.
func (s *Syncer) SyncPod(ctx context.Context, pod *v1.Pod) (next time.Duration, err error) {
	ctx, span := s.tracer.Start(ctx, "syncPod", trace.WithAttributes(tracing.PodAttributes(string(pod.UID), pod.Namespace, pod.Name)...))
	defer func() { tracing.End(span, err) }()
	return s.syncPod(ctx, pod)
}

func (s *Syncer) syncPod(ctx context.Context, pod *v1.Pod) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if s.cfg.Resizes != nil {
		// The resources admission allocated, not a resize still pending.
		pod, _ = s.cfg.Resizes.UpdatePodFromAllocation(pod)
	}
	start := s.clock.Now()
	op := "sync"
	if _, known := s.cfg.Statuses.Get(pod.UID); !known {
		op = "create"
		s.firstSeen.LoadOrStore(pod.UID, start)
	}
	defer func() { metrics.PodWorkerDuration.WithLabelValues(op).Observe(s.clock.Since(start).Seconds()) }()
	if s.cfg.Mirrors != nil && podspec.IsStatic(pod) {
		if err := s.cfg.Mirrors.Ensure(ctx, pod); err != nil {
			logger.Error(err, "Cannot create the mirror pod", "pod", klog.KObj(pod))
		}
	}
	rs, err := s.runtimeStatus(ctx, pod)
	if err != nil {
		return 0, err
	}
	// Whatever this sync changes in the runtime is done when it returns.
	defer func() { s.synced.Store(pod.UID, s.clock.Now()) }()
	if ev, ok := s.evictions.Load(pod.UID); ok {
		return 0, s.evict(ctx, pod, rs, ev.(*eviction))
	}
	// A pod the API already reports as finished never runs again, even if
	// the runtime lost its containers; its API status is final.
	if podspec.IsTerminal(pod.Status.Phase) {
		if err := s.cfg.Runtime.KillPod(ctx, pod, kuberuntime.RunningFromStatus(rs, nil), nil); err != nil {
			return 0, err
		}
		if s.cfg.DRA != nil && s.cfg.DRA.PodMightNeedToUnprepareResources(pod.UID) {
			return 0, s.unprepare(ctx, pod)
		}
		return 0, nil
	}
	if exceeded, _ := s.deadline(pod); exceeded {
		return 0, s.failPastDeadline(ctx, pod, rs)
	}
	var res kubecontainer.SyncResult
	paths, err := s.cfg.Volumes.Setup(ctx, pod)
	if err != nil {
		msg := fmt.Sprintf("MountVolume.SetUp failed: %v", err)
		s.cfg.Recorder.Event(pod, v1.EventTypeWarning, "FailedMount", msg)
		for _, c := range pod.Spec.Containers {
			if cs := rs.Latest(c.Name); cs == nil {
				res.Wait(c.Name, kubecontainer.DefaultWaitingReason(pod), msg)
			}
		}
		s.setStatus(ctx, pod, rs, res)
		// Retried with the pod worker's back-off (200 ms doubling): the usual
		// cause is transient (a token refused until the API server's node
		// authorizer has seen the pod's binding).
		return 0, fmt.Errorf("volumes: %w", err)
	}
	res, err = s.cfg.Runtime.SyncPod(ctx, pod, rs, kuberuntime.PodEnv{HostIPs: s.cfg.HostIPs, VolumePaths: paths, Probes: s.cfg.Prober})
	if res.Changed && ctx.Err() == nil {
		if fresh, ferr := s.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); ferr == nil {
			rs = fresh
		}
	}
	s.syncProbes(pod, rs)
	if s.cfg.Resizes != nil {
		s.cfg.Resizes.ObserveSync(ctx, pod, s.cfg.Runtime.ResizeInProgress(pod, rs), res.ResizeError)
	}
	s.setStatus(ctx, pod, rs, res)
	s.observed.record(rs)
	if rerr := s.releaseIfFinished(ctx, pod, rs); rerr != nil {
		err = errors.Join(err, rerr)
	}
	next := res.RequeueAfter
	// Synced again when the active deadline passes; asked after setStatus,
	// which gives a new pod its start time (nothing else wakes a running
	// pod's worker in time: the PLEG's events about what this sync started
	// carry nothing new).
	if _, left := s.deadline(pod); left > 0 && (next == 0 || left < next) {
		next = left
	}
	return next, err
}

// runtimeStatus is what the runtime has of pod, as of the end of its last
// sync or later: the last relist's lists serve when they are that recent
// (a periodic resync, a sync woken by the relist's event), the runtime is
// asked otherwise (a pod's first sync, a sync right after the last one).
func (s *Syncer) runtimeStatus(ctx context.Context, pod *v1.Pod) (*kubecontainer.PodStatus, error) {
	if t, ok := s.synced.Load(pod.UID); ok {
		return s.cfg.Runtime.GetPodStatusNewerThan(ctx, pod.UID, pod.Name, pod.Namespace, t.(time.Time))
	}
	return s.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
}

// syncProbes gives the prober the pod's running app containers.
func (s *Syncer) syncProbes(pod *v1.Pod, rs *kubecontainer.PodStatus) {
	var running []prober.Container
	add := func(c *v1.Container) {
		if cs := rs.Latest(c.Name); cs != nil && cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, prober.Container{Spec: c, ID: cs.ID, StartedAt: cs.StartedAt})
		}
	}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i]) // sidecars are probed like app containers
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	podIP := ""
	if len(rs.IPs) > 0 {
		podIP = rs.IPs[0]
	} else if pod.Spec.HostNetwork && len(s.cfg.HostIPs) > 0 {
		podIP = s.cfg.HostIPs[0]
	}
	s.cfg.Prober.Sync(s.cfg.ProbeContext, pod, podIP, running)
}

// setStatus computes and records the pod's status. The first status of an
// API pod continues from what the API has (start time, transition times,
// a terminal phase).
func (s *Syncer) setStatus(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, res kubecontainer.SyncResult) v1.PodStatus {
	prev := s.previous(pod)
	st := s.generate(ctx, pod, rs, res, prev, false)
	if prev == nil || !apiequality.Semantic.DeepEqual(*prev, st) {
		s.cfg.Statuses.Set(ctx, pod, st)
	}
	if st.Phase == v1.PodRunning {
		if seen, ok := s.firstSeen.LoadAndDelete(pod.UID); ok {
			metrics.PodStartDuration.Observe(s.clock.Since(seen.(time.Time)).Seconds())
		}
	}
	return st
}

// previous is the status the pod's next one continues from: the last one
// recorded, or the API's for a pod nodelet has not synced yet.
func (s *Syncer) previous(pod *v1.Pod) *v1.PodStatus {
	if old, ok := s.cfg.Statuses.Get(pod.UID); ok {
		return &old
	}
	if pod.Status.Phase != "" && !podspec.IsStatic(pod) {
		return pod.Status.DeepCopy()
	}
	return nil
}

// generate computes the pod's status from what the runtime reports and
// what the sync did, continuing from prev; terminal: the node stopped its
// containers for good (status.Input.Terminal).
func (s *Syncer) generate(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, res kubecontainer.SyncResult, prev *v1.PodStatus, terminal bool) v1.PodStatus {
	st := status.Generate(status.Input{
		Pod: pod, Runtime: rs, Sync: res, Previous: prev, HostIPs: s.cfg.HostIPs, RuntimeName: s.cfg.RuntimeName, Now: s.clock.Now(),
		Probes: s.cfg.Prober, Terminal: terminal, SupportsRRO: s.cfg.SupportsRRO != nil && s.cfg.SupportsRRO(ctx, pod),
		ResizeConditions: s.resizeConditions(pod.UID),
	})
	if s.cfg.AllocatedResources != nil {
		s.cfg.AllocatedResources.UpdateAllocatedResourcesStatus(pod, &st)
	}
	return st
}

func (s *Syncer) resizeConditions(uid types.UID) []v1.PodCondition {
	if s.cfg.Resizes == nil {
		return nil
	}
	return s.cfg.Resizes.Conditions(uid)
}

// StopPod implements podworkers.Syncer: it stops the pod gracefully (pod
// may be nil for a pod only the runtime knows; running is then set).
func (s *Syncer) StopPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, grace *int64) (err error) {
	uid, name, ns := podIdentity(pod, running)
	ctx, span := s.tracer.Start(ctx, "syncTerminatingPod", trace.WithAttributes(tracing.PodAttributes(string(uid), ns, name)...))
	defer func() { tracing.End(span, err) }()
	return s.stopPod(ctx, pod, running, grace)
}

func (s *Syncer) stopPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, grace *int64) error {
	logger := klog.FromContext(ctx)
	uid, name, ns := podIdentity(pod, running)
	s.cfg.Prober.RemovePod(uid)
	s.firstSeen.Delete(uid)
	s.observed.forget(uid)
	s.synced.Delete(uid)
	rs, err := s.cfg.Runtime.GetPodStatus(ctx, uid, name, ns)
	if err != nil {
		return err
	}
	rp := kuberuntime.RunningFromStatus(rs, running)
	start := s.clock.Now()
	if err := s.cfg.Runtime.KillPod(ctx, pod, rp, grace); err != nil {
		return err
	}
	// As upstream: the claims are released once every container stopped
	// and before the final status reaches the API server (which lets the
	// claims be deallocated). A pod only the runtime knows is left to the
	// DRA manager's reconcile loop.
	if err := s.unprepare(ctx, pod); err != nil {
		return err
	}
	logger.Info("Pod stopped", "pod", klog.KRef(ns, name), "podUID", uid, "took", s.clock.Since(start).Round(time.Millisecond))
	return nil
}

// unprepare releases the pod's ResourceClaims once its containers
// stopped; its terminal phase, held by the status syncer until then, is
// written at once.
func (s *Syncer) unprepare(ctx context.Context, pod *v1.Pod) error {
	if pod == nil || s.cfg.DRA == nil {
		return nil
	}
	had := s.cfg.DRA.PodMightNeedToUnprepareResources(pod.UID)
	if err := s.cfg.DRA.UnprepareResources(ctx, pod); err != nil {
		return err
	}
	if had {
		s.cfg.Statuses.MarkDirty(pod.UID)
	}
	return nil
}

// releaseIfFinished releases the claims of a pod whose containers all
// stopped for good (its status terminal, none running), as upstream's
// SyncTerminatingPod does for a pod that finished: its terminal phase,
// which the status writer holds back while claims are prepared, then
// reaches the API (and the pod's owner, a Job, sees it finished).
func (s *Syncer) releaseIfFinished(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus) error {
	if s.cfg.DRA == nil || !s.cfg.DRA.PodMightNeedToUnprepareResources(pod.UID) {
		return nil
	}
	if st, ok := s.cfg.Statuses.Get(pod.UID); !ok || !podspec.IsTerminal(st.Phase) || rs.AnyRunning() {
		return nil
	}
	return s.unprepare(ctx, pod)
}

// CleanupPod implements podworkers.Syncer: it removes a stopped pod's
// sandboxes, containers, logs and directories. A pod deleted in the API
// gets its final status written and is then deleted for good; a static
// pod's mirror pod is deleted. A pod restarting (added again while it
// terminated) keeps its stopped sandboxes, containers and logs, which the
// container GC removes in time, and its mirror pod.
func (s *Syncer) CleanupPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, restarting bool) (err error) {
	uid, name, ns := podIdentity(pod, running)
	ctx, span := s.tracer.Start(ctx, "syncTerminatedPod", trace.WithAttributes(tracing.PodAttributes(string(uid), ns, name)...))
	defer func() { tracing.End(span, err) }()
	return s.cleanupPod(ctx, pod, running, restarting)
}

func (s *Syncer) cleanupPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, restarting bool) error {
	logger := klog.FromContext(ctx)
	uid, name, ns := podIdentity(pod, running)
	// What is left after stopping: every sandbox and container, stopped.
	rs, err := s.cfg.Runtime.GetPodStatus(ctx, uid, name, ns)
	if err != nil {
		return err
	}
	// Volumes first, as upstream deletes a pod from the API only once its
	// volumes are unmounted: the next pod of a StatefulSet (same name, same
	// ReadWriteOnce claim) is created only after this one's volume was
	// unpublished (and unstaged).
	if err := s.cfg.Volumes.Teardown(uid); err != nil {
		return err
	}
	if pod != nil && s.cfg.Finisher != nil && pod.DeletionTimestamp != nil && !podspec.IsStatic(pod) {
		final := s.setStatus(ctx, pod, rs, kubecontainer.SyncResult{})
		final.Phase = FinalPhase(final)
		if err := s.cfg.Finisher.Finish(ctx, pod, final); err != nil {
			return err
		}
	}
	if pod != nil && s.cfg.Mirrors != nil && podspec.IsStatic(pod) && !restarting {
		if err := s.cfg.Mirrors.Delete(ctx, pod); err != nil {
			logger.Error(err, "Cannot delete the mirror pod", "pod", klog.KObj(pod))
		}
	}
	if !restarting {
		if err := s.cfg.Runtime.RemovePod(ctx, kuberuntime.RunningFromStatus(rs, running)); err != nil {
			return err
		}
	}
	// What cannot be removed yet is left to the housekeeping's orphan sweep.
	if err := s.cfg.Cgroups.RemovePod(ctx, uid); err != nil {
		logger.Error(err, "Cannot remove the pod's cgroups yet", "podUID", uid)
	}
	if pod != nil {
		s.cfg.Images.Forget(pod)
	}
	if s.cfg.Objects != nil {
		s.cfg.Objects.Forget(uid)
	}
	s.cfg.Statuses.Delete(uid)
	s.evictions.Delete(uid)
	return nil
}

// FinalPhase is the phase of a pod whose containers were all stopped: a
// terminal phase stays, else Succeeded when every container exited 0,
// Failed otherwise.
func FinalPhase(st v1.PodStatus) v1.PodPhase {
	if podspec.IsTerminal(st.Phase) {
		return st.Phase
	}
	for _, c := range st.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
			return v1.PodFailed
		}
	}
	return v1.PodSucceeded
}

func podIdentity(pod *v1.Pod, running *kubecontainer.RunningPod) (uid types.UID, name, ns string) {
	if pod != nil {
		return pod.UID, pod.Name, pod.Namespace
	}
	return running.UID, running.Name, running.Namespace
}
