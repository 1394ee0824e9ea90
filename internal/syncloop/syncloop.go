package syncloop

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/lifecycle"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podmanager"
	"github.com/nodelet/nodelet/internal/source/apiserver"
	"github.com/nodelet/nodelet/internal/status"
)

// Source names in the pod manager.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// HousekeepingPeriod is how often the main loop admits pods that waited
// and removes what pods that are gone left behind.
const HousekeepingPeriod = 2 * time.Second

// Workers is what the main loop asks of the pod workers.
type Workers interface {
	Sync(pod *v1.Pod)
	Terminate(uid types.UID, pod *v1.Pod, running *kubecontainer.RunningPod, gracePeriod *int64)
	Notify(uid types.UID)
	Readded(uid types.UID) bool
	Forget(uid types.UID)
	Finished() []types.UID
}

// OfflinePods is the offline checkpoint, as the main loop sees it.
type OfflinePods interface {
	// Restored: the pod runs from the checkpoint (admitted before a
	// restart: not admitted again).
	Restored(uid types.UID) bool
	// Synced: the API server's full set of pods arrived.
	Synced(ctx context.Context, pods []*v1.Pod)
}

// Leftovers are what pods leave on the node besides their containers,
// removed by housekeeping once the pods are gone.
type Leftovers struct {
	// PodDirs lists the pods' directories and removes one.
	PodDirs interface {
		PodUIDs() ([]types.UID, error)
		Teardown(uid types.UID) error
	}
	// PodLogsDir holds the pods' log directories.
	PodLogsDir string
	// Cgroups removes the cgroups of pods not kept.
	Cgroups interface {
		CleanupOrphans(ctx context.Context, keep func(types.UID) bool) ([]types.UID, error)
	}
	// GCBackoff forgets the restart back-offs of containers long gone.
	GCBackoff func()
	// UserNamespaces frees the user namespace IDs of pods not kept; nil:
	// none allocated.
	UserNamespaces interface {
		CleanupOrphaned(ctx context.Context, keep func(types.UID) bool) error
	}
	// Actuated forgets the resources actuated for the containers of pods
	// not kept (kuberuntime.Manager.ForgetActuated); nil: none kept.
	Actuated func(ctx context.Context, keep func(types.UID) bool)
}

// Allocation admits pods with the resources it allocates them and
// decides their in-place resizes (allocation.Manager).
type Allocation interface {
	// AddPod admits a new pod next to others; pending: its spec asks for
	// a resize not allocated yet.
	AddPod(ctx context.Context, pod *v1.Pod, others []*v1.Pod) (r admission.Result, pending bool)
	// Backfill takes an admitted pod's resize conditions from its status.
	Backfill(pod *v1.Pod)
	PushPending(ctx context.Context, uid types.UID)
	// PodUpdated is told of a pod's new version; it returns the pods to
	// sync (resizes allocated, conditions changed).
	PodUpdated(ctx context.Context, old, pod *v1.Pod) []*v1.Pod
	RemovePod(ctx context.Context, uid types.UID)
	// Retry and RetryDue try the pending resizes again (on a trigger;
	// when the periodic retry is due) and return the pods to sync.
	Retry(ctx context.Context, trigger string) []*v1.Pod
	RetryDue(ctx context.Context) []*v1.Pod
	RemoveOrphans(ctx context.Context, keep func(types.UID) bool)
}

// The retry triggers of pending resizes (allocation's).
const (
	triggerPodsAdded     = "pods_added"
	triggerPodsRemoved   = "pods_removed"
	triggerPodTerminated = "pod_terminated"
)

// Config is the main loop's. Every field but Offline is required.
type Config struct {
	Pods      *podmanager.Manager
	View      *podmanager.View
	Workers   Workers
	Admission *admission.Chain
	// AdmissionNode is the Node pods are admitted against; nil until it is
	// registered, when new pods wait (Pending).
	AdmissionNode func() *v1.Node
	Statuses      *status.Store
	Recorder      record.EventRecorder
	// Release frees what admission reserved for a pod (its devices).
	Release func(types.UID)
	// Redundant tells PLEG events the pod's last sync already saw.
	Redundant func(*pleg.Event) bool
	// Relisted is the last relist's view of the runtime.
	Relisted func() ([]*kubecontainer.RunningPod, bool)
	// Offline is the offline checkpoint; nil when offline autonomy is off.
	Offline   OfflinePods
	Leftovers Leftovers
	// SourcesReady is closed by the loop once every source was seen once.
	SourcesReady *lifecycle.Ready
	// Clock is the real clock when nil.
	Clock clock.Clock
	// PodCertificates are told of the pods added, updated and removed
	// (podcertificate.Manager: their podCertificate sources); nil: none.
	PodCertificates interface {
		TrackPod(ctx context.Context, pod *v1.Pod)
		ForgetPod(ctx context.Context, pod *v1.Pod)
	}
	// Allocation admits pods with their allocated resources and decides
	// in-place resizes; nil: the admission chain alone, no resize.
	Allocation Allocation
}

// Loop is the main loop: the only writer of the desired state. It applies
// source updates (admitting new pods), forwards PLEG events and probe
// results to the pod workers, and does housekeeping. Its methods are
// called from Run's goroutine (or before Run), except LastTurn.
type Loop struct {
	cfg Config
	// pending are the pods waiting for the Node to be admitted.
	pending     []*v1.Pod
	sourcesSeen map[string]bool
	// lastTurn is when the loop last turned (healthz), in Unix ns.
	lastTurn atomic.Int64
}

// New returns the main loop of cfg.
func New(cfg Config) (*Loop, error) {
	switch {
	case cfg.Pods == nil || cfg.View == nil || cfg.Workers == nil || cfg.Admission == nil || cfg.Statuses == nil:
		return nil, errors.New("syncloop: Config needs Pods, View, Workers, Admission and Statuses")
	case cfg.AdmissionNode == nil || cfg.Recorder == nil || cfg.Release == nil || cfg.Redundant == nil || cfg.Relisted == nil:
		return nil, errors.New("syncloop: Config needs AdmissionNode, Recorder, Release, Redundant and Relisted")
	case cfg.Leftovers.PodDirs == nil || cfg.Leftovers.Cgroups == nil || cfg.Leftovers.GCBackoff == nil || cfg.SourcesReady == nil:
		return nil, errors.New("syncloop: Config needs Leftovers and SourcesReady")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	l := &Loop{cfg: cfg, sourcesSeen: map[string]bool{}}
	l.lastTurn.Store(cfg.Clock.Now().UnixNano())
	return l, nil
}

// LastTurn is when the loop last turned. Safe for concurrent use.
func (l *Loop) LastTurn() time.Time { return time.Unix(0, l.lastTurn.Load()) }

// Inputs are the main loop's inputs; a nil channel is a source not
// configured.
type Inputs struct {
	File    <-chan []*v1.Pod
	HTTP    <-chan []*v1.Pod
	API     <-chan apiserver.Event
	Mirrors <-chan *v1.Pod
	PLEG    <-chan *pleg.Event
	Probes  <-chan types.UID
	// Abort is closed when a fatal loop failed: Run returns AbortErr().
	Abort    <-chan struct{}
	AbortErr func() error
	// Tick is housekeeping's ticker (every HousekeepingPeriod).
	Tick <-chan time.Time
}

// Run turns until ctx is done (nil) or Abort is closed (AbortErr).
func (l *Loop) Run(ctx context.Context, in Inputs) error {
	for {
		l.lastTurn.Store(l.cfg.Clock.Now().UnixNano())
		select {
		case <-ctx.Done():
			return nil
		case <-in.Abort:
			return in.AbortErr()
		case pods := <-in.File:
			l.apply(ctx, l.cfg.Pods.Set(SourceFile, pods))
			l.Seen(SourceFile)
		case pods := <-in.HTTP:
			l.apply(ctx, l.cfg.Pods.Set(SourceHTTP, pods))
			l.Seen(SourceHTTP)
		case e := <-in.API:
			l.applyAPI(ctx, e)
		case mp := <-in.Mirrors:
			l.mirrorChanged(mp)
		case e := <-in.PLEG:
			if !l.cfg.Redundant(e) {
				l.cfg.Workers.Notify(e.ID)
			}
		case uid := <-in.Probes:
			l.cfg.Workers.Notify(uid)
		case <-in.Tick:
			l.housekeeping(ctx)
		}
	}
}

// Seen records that a source sent its whole set once (or is not
// configured); SourcesReady is closed once all three were.
func (l *Loop) Seen(source string) {
	l.sourcesSeen[source] = true
	if l.sourcesSeen[SourceFile] && l.sourcesSeen[SourceHTTP] && l.sourcesSeen[SourceAPI] {
		l.cfg.SourcesReady.Close()
	}
}

// Restore runs pods restored from the offline checkpoint: they are the API
// source's pods until the API server's own set replaces them, but the
// source does not count as seen: nothing is removed for lack of the API
// server.
func (l *Loop) Restore(ctx context.Context, pods []*v1.Pod) {
	l.apply(ctx, l.cfg.Pods.Set(SourceAPI, pods))
}

// applyAPI folds one API source event into the desired state.
func (l *Loop) applyAPI(ctx context.Context, e apiserver.Event) {
	switch e.Op {
	case apiserver.Set:
		l.apply(ctx, l.cfg.Pods.Set(SourceAPI, e.Pods))
		for _, p := range e.Pods {
			l.cfg.Statuses.MarkDirty(p.UID) // statuses computed offline are written now
		}
		if l.cfg.Offline != nil {
			l.cfg.Offline.Synced(ctx, e.Pods)
		}
		l.Seen(SourceAPI)
	case apiserver.Add, apiserver.Update:
		for _, p := range e.Pods {
			l.apply(ctx, l.cfg.Pods.Upsert(SourceAPI, p))
		}
	case apiserver.Delete:
		for _, p := range e.Pods {
			l.apply(ctx, l.cfg.Pods.Remove(SourceAPI, p))
		}
	}
}

// mirrorChanged: a mirror pod changed or was deleted; its static pod's
// worker puts it right.
func (l *Loop) mirrorChanged(mp *v1.Pod) {
	if p, ok := l.cfg.Pods.GetByName(mp.Namespace, mp.Name); ok {
		l.cfg.Workers.Notify(p.UID)
		l.cfg.Statuses.MarkDirty(p.UID) // a new mirror pod needs the status
	}
}

// apply hands what changed in the desired state to the pod workers.
func (l *Loop) apply(ctx context.Context, ch podmanager.Changes) {
	logger := klog.FromContext(ctx)
	if pc := l.cfg.PodCertificates; pc != nil {
		// As upstream's HandlePodAdditions/Updates/Removes.
		for _, p := range ch.Removed {
			pc.ForgetPod(ctx, p)
		}
		for _, pods := range [][]*v1.Pod{ch.Added, ch.Updated} {
			for _, p := range pods {
				pc.TrackPod(ctx, p)
			}
		}
	}
	for _, p := range ch.Removed {
		logger.Info("Pod removed from its source; terminating it", "pod", klog.KObj(p), "podUID", p.UID)
		l.cfg.Workers.Terminate(p.UID, p, nil, nil)
		// Its devices are free for the next pod at once, as upstream's
		// (its active pods are the pod manager's): the device manager's
		// own pruning waits for every source to be seen once, which a
		// pod deleted during the API's first sync would otherwise outlast.
		l.cfg.Release(p.UID)
		if l.cfg.Allocation != nil {
			l.cfg.Allocation.RemovePod(ctx, p.UID)
		}
	}
	if len(ch.Removed) > 0 {
		l.retryResizes(ctx, triggerPodsRemoved, nil)
	}
	for _, p := range ch.Added {
		l.admitAndRun(ctx, p)
	}
	if len(ch.Added) > 0 {
		l.retryResizes(ctx, triggerPodsAdded, nil)
	}
	for i, p := range ch.Updated {
		switch {
		case !l.cfg.Pods.Rejected(p.UID):
			// A resize is decided before the pod's worker syncs it.
			var resized []*v1.Pod
			if l.cfg.Allocation != nil && p.DeletionTimestamp == nil && i < len(ch.Previous) {
				resized = l.cfg.Allocation.PodUpdated(ctx, ch.Previous[i], p)
			}
			l.dispatch(p)
			l.syncOthers(resized, p.UID)
		case p.DeletionTimestamp != nil:
			l.finishRejected(p)
		}
	}
}

// retryResizes tries the pending resizes again and syncs the pods whose
// resize was allocated or whose conditions changed (but skip).
func (l *Loop) retryResizes(ctx context.Context, trigger string, due func(context.Context) []*v1.Pod) {
	if l.cfg.Allocation == nil {
		return
	}
	var pods []*v1.Pod
	if due != nil {
		pods = due(ctx)
	} else {
		pods = l.cfg.Allocation.Retry(ctx, trigger)
	}
	l.syncOthers(pods, "")
}

// syncOthers syncs pods, skip excepted.
func (l *Loop) syncOthers(pods []*v1.Pod, skip types.UID) {
	for _, p := range pods {
		if p.UID != skip && !l.cfg.Pods.Rejected(p.UID) {
			l.dispatch(p)
		}
	}
}

// finishRejected: a rejected pod being deleted is terminated by its worker
// like any other, so that what may still run of it (admitted before a
// restart, refused after) stops and, once nothing is left, its Failed
// status is final and the pod is deleted from the API, as upstream's pod
// workers finish a terminal pod (issue 118472).
func (l *Loop) finishRejected(p *v1.Pod) {
	l.cfg.Workers.Terminate(p.UID, p, nil, p.DeletionGracePeriodSeconds)
}

// dispatch gives a known pod's latest version to its worker: a pod being
// deleted is terminated with its deletion grace period.
func (l *Loop) dispatch(p *v1.Pod) {
	if p.DeletionTimestamp != nil {
		l.cfg.Workers.Terminate(p.UID, p, nil, p.DeletionGracePeriodSeconds)
		return
	}
	l.cfg.Workers.Sync(p)
}

// admitAndRun admits a new pod and starts its worker, or records why not.
func (l *Loop) admitAndRun(ctx context.Context, p *v1.Pod) {
	logger := klog.FromContext(ctx)
	if l.cfg.Offline != nil && l.cfg.Offline.Restored(p.UID) {
		logger.Info("Running a pod from the offline checkpoint", "pod", klog.KObj(p), "podUID", p.UID)
		l.cfg.Workers.Forget(p.UID)
		l.dispatch(p)
		return
	}
	if l.cfg.AdmissionNode() == nil {
		// The Node is not registered yet: admit once its allocatable is known.
		l.pending = append(l.pending, p)
		return
	}
	r, resizePending := l.admit(ctx, p)
	if !r.Admit {
		logger.Info("Pod rejected by admission", "pod", klog.KObj(p), "reason", r.Reason, "message", r.Message)
		l.cfg.Pods.Reject(p.UID)
		l.cfg.Recorder.Event(p, v1.EventTypeWarning, r.Reason, r.Message)
		st := *p.Status.DeepCopy()
		// upstream's rejectPod: the status message says so.
		st.Phase, st.Reason, st.Message = v1.PodFailed, r.Reason, "Pod was rejected: "+r.Message
		l.cfg.Statuses.Set(ctx, p, st)
		if p.DeletionTimestamp != nil {
			l.finishRejected(p)
		}
		return
	}
	logger.Info("Pod added", "pod", klog.KObj(p), "podUID", p.UID)
	if l.cfg.Allocation != nil {
		l.cfg.Allocation.Backfill(p)
		if resizePending {
			l.cfg.Allocation.PushPending(ctx, p.UID)
		}
	}
	// The same UID may have run and finished before, or be terminating
	// still (a manifest removed and put back): it runs again once
	// terminated (OnTerminated).
	if l.cfg.Workers.Readded(p.UID) {
		logger.Info("Pod added again while terminating; it restarts once terminated", "pod", klog.KObj(p), "podUID", p.UID)
	}
	l.cfg.Workers.Forget(p.UID)
	l.dispatch(p)
}

// admit runs admission: through the allocation manager when there is one
// (the pod is admitted with the resources allocated to it before a
// restart; resizePending: its spec asks for others).
func (l *Loop) admit(ctx context.Context, p *v1.Pod) (r admission.Result, resizePending bool) {
	if l.cfg.Allocation != nil {
		return l.cfg.Allocation.AddPod(ctx, p, l.cfg.View.Active(p.UID))
	}
	return l.cfg.Admission.Admit(ctx, admission.Attributes{Pod: p, OtherPods: l.cfg.View.Active(p.UID)}), false
}

// admitPending admits the pods that waited for the Node and are still
// wanted as they were.
func (l *Loop) admitPending(ctx context.Context) {
	if len(l.pending) == 0 || l.cfg.AdmissionNode() == nil {
		return
	}
	pending := l.pending
	l.pending = nil
	for _, p := range pending {
		if cur, ok := l.cfg.Pods.Get(p.UID); ok && cur == p {
			l.admitAndRun(ctx, p)
		}
	}
}

// Pending are the pods waiting for the Node (called from the main loop
// only: device allocation runs in admission).
func (l *Loop) Pending() []*v1.Pod { return l.pending }

// OnTerminated is told by a pod's worker that it finished terminating the
// pod. The same pod may have come back meanwhile: it runs again.
// Otherwise the worker's memory of the finished pod stays until
// housekeeping sees the runtime no longer has it, so a stale relist cannot
// start a second termination.
func (l *Loop) OnTerminated(ctx context.Context, uid types.UID) {
	if p, ok := l.cfg.Pods.Get(uid); ok && p.DeletionTimestamp == nil {
		l.cfg.Workers.Forget(uid)
		l.cfg.Workers.Sync(p)
	}
	// Its resources are free: a deferred resize may fit now.
	l.retryResizes(ctx, triggerPodTerminated, nil)
}

// housekeeping admits pods that waited for the Node, stops runtime pods
// nobody wants and removes what pods that are gone left (directories,
// logs, cgroups). Stopping and removing wait for every source to have
// been seen, so pods are never killed just because their source (the API
// server) is slow or unreachable.
func (l *Loop) housekeeping(ctx context.Context) {
	l.admitPending(ctx)
	if l.cfg.Allocation != nil {
		l.retryResizes(ctx, "", l.cfg.Allocation.RetryDue)
	}
	if !l.cfg.SourcesReady.IsReady() {
		return
	}
	running, ok := l.cfg.Relisted()
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	inRuntime := map[types.UID]bool{}
	for _, rp := range running {
		inRuntime[rp.UID] = true
		if l.cfg.View.Wanted(rp.UID) {
			continue
		}
		logger.Info("Found a pod in the runtime that is not desired; terminating it", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		l.cfg.Workers.Terminate(rp.UID, nil, rp, nil)
	}
	for _, uid := range l.cfg.Workers.Finished() {
		if !inRuntime[uid] {
			l.cfg.Workers.Forget(uid)
		}
	}
	keep := func(uid types.UID) bool { return l.cfg.View.Known(uid, inRuntime) }
	lo := l.cfg.Leftovers
	if uids, err := lo.PodDirs.PodUIDs(); err == nil {
		for _, uid := range uids {
			if keep(uid) {
				continue
			}
			if err := lo.PodDirs.Teardown(uid); err != nil {
				logger.Error(err, "Cannot remove the directory of a removed pod", "podUID", uid)
			} else {
				logger.V(2).Info("Removed the directory of a removed pod", "podUID", uid)
			}
		}
	}
	removed, err := kuberuntime.RemoveOrphanLogDirs(lo.PodLogsDir, keep)
	for _, uid := range removed {
		logger.V(2).Info("Removed the logs of a removed pod", "podUID", uid)
	}
	if err != nil {
		logger.Error(err, "Cannot remove the logs of removed pods")
	}
	removed, err = lo.Cgroups.CleanupOrphans(ctx, keep)
	for _, uid := range removed {
		logger.V(2).Info("Removed the cgroups of a removed pod", "podUID", uid)
	}
	if err != nil {
		logger.Error(err, "Cannot remove the cgroups of removed pods")
	}
	if lo.UserNamespaces != nil {
		if err := lo.UserNamespaces.CleanupOrphaned(ctx, keep); err != nil {
			logger.Error(err, "Cannot free the user namespaces of removed pods")
		}
	}
	if l.cfg.Allocation != nil {
		l.cfg.Allocation.RemoveOrphans(ctx, keep)
	}
	if lo.Actuated != nil {
		lo.Actuated(ctx, keep)
	}
	lo.GCBackoff()
}
