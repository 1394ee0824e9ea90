package nodelet

import (
	"context"
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
	sourceFile = "file"
	sourceAPI  = "api"
)

// housekeepingPeriod is how often the main loop admits pods that waited
// and removes what pods that are gone left behind.
const housekeepingPeriod = 2 * time.Second

// workers is what the main loop asks of the pod workers.
type workers interface {
	Sync(pod *v1.Pod)
	Terminate(uid types.UID, pod *v1.Pod, running *kubecontainer.RunningPod, gracePeriod *int64)
	Notify(uid types.UID)
	Forget(uid types.UID)
	Finished() []types.UID
}

// offlinePods is the offline checkpoint, as the main loop sees it.
type offlinePods interface {
	// Restored: the pod runs from the checkpoint (admitted before a
	// restart: not admitted again).
	Restored(uid types.UID) bool
	// Synced: the API server's full set of pods arrived.
	Synced(ctx context.Context, pods []*v1.Pod)
}

// leftovers are what pods leave on the node besides their containers,
// removed by housekeeping once the pods are gone.
type leftovers struct {
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
}

// mainLoop is the main loop: the only writer of the desired state. It
// applies source updates (admitting new pods), forwards PLEG events and
// probe results to the pod workers, and does housekeeping.
type mainLoop struct {
	pods      *podmanager.Manager
	view      *podmanager.View
	workers   workers
	admission *admission.Chain
	// admissionNode is the Node pods are admitted against; nil until it is
	// registered, when new pods wait (pending).
	admissionNode func() *v1.Node
	statuses      *status.Store
	recorder      record.EventRecorder
	// release frees what admission reserved for a pod (its devices).
	release func(types.UID)
	// redundant tells PLEG events the pod's last sync already saw.
	redundant func(*pleg.Event) bool
	// relisted is the last relist's view of the runtime.
	relisted func() ([]*kubecontainer.RunningPod, bool)
	// offline is nil when offline autonomy is off.
	offline   offlinePods
	leftovers leftovers
	clock     clock.Clock

	// pending are the pods waiting for the Node to be admitted.
	pending     []*v1.Pod
	sourcesSeen map[string]bool
	// sourcesReady is closed once every source was seen once.
	sourcesReady lifecycle.Ready
	// lastTurn is when the loop last turned (healthz), in Unix ns.
	lastTurn atomic.Int64
}

// inputs are the main loop's inputs.
type inputs struct {
	file     <-chan []*v1.Pod
	api      <-chan apiserver.Event
	mirrors  <-chan *v1.Pod
	pleg     <-chan *pleg.Event
	probes   <-chan types.UID
	abort    <-chan struct{}
	abortErr func() error
	tick     <-chan time.Time
}

// run turns until ctx is done (nil) or abort is closed (abortErr).
func (l *mainLoop) run(ctx context.Context, in inputs) error {
	for {
		l.lastTurn.Store(l.clock.Now().UnixNano())
		select {
		case <-ctx.Done():
			return nil
		case <-in.abort:
			return in.abortErr()
		case pods := <-in.file:
			l.apply(ctx, l.pods.Set(sourceFile, pods))
			l.seen(sourceFile)
		case e := <-in.api:
			l.applyAPI(ctx, e)
		case mp := <-in.mirrors:
			l.mirrorChanged(mp)
		case e := <-in.pleg:
			if !l.redundant(e) {
				l.workers.Notify(e.ID)
			}
		case uid := <-in.probes:
			l.workers.Notify(uid)
		case <-in.tick:
			l.housekeeping(ctx)
		}
	}
}

// seen records that a source sent its whole set once.
func (l *mainLoop) seen(source string) {
	l.sourcesSeen[source] = true
	if l.sourcesSeen[sourceFile] && l.sourcesSeen[sourceAPI] {
		l.sourcesReady.Close()
	}
}

// applyAPI folds one API source event into the desired state.
func (l *mainLoop) applyAPI(ctx context.Context, e apiserver.Event) {
	switch e.Op {
	case apiserver.Set:
		l.apply(ctx, l.pods.Set(sourceAPI, e.Pods))
		for _, p := range e.Pods {
			l.statuses.MarkDirty(p.UID) // statuses computed offline are written now
		}
		if l.offline != nil {
			l.offline.Synced(ctx, e.Pods)
		}
		l.seen(sourceAPI)
	case apiserver.Add, apiserver.Update:
		for _, p := range e.Pods {
			l.apply(ctx, l.pods.Upsert(sourceAPI, p))
		}
	case apiserver.Delete:
		for _, p := range e.Pods {
			l.apply(ctx, l.pods.Remove(sourceAPI, p))
		}
	}
}

// mirrorChanged: a mirror pod changed or was deleted; its static pod's
// worker puts it right.
func (l *mainLoop) mirrorChanged(mp *v1.Pod) {
	if p, ok := l.pods.GetByName(mp.Namespace, mp.Name); ok {
		l.workers.Notify(p.UID)
		l.statuses.MarkDirty(p.UID) // a new mirror pod needs the status
	}
}

// apply hands what changed in the desired state to the pod workers.
func (l *mainLoop) apply(ctx context.Context, ch podmanager.Changes) {
	logger := klog.FromContext(ctx)
	for _, p := range ch.Removed {
		logger.Info("Pod removed from its source; terminating it", "pod", klog.KObj(p), "podUID", p.UID)
		l.workers.Terminate(p.UID, p, nil, nil)
		// Its devices are free for the next pod at once, as upstream's
		// (its active pods are the pod manager's): the device manager's
		// own pruning waits for every source to be seen once, which a
		// pod deleted during the API's first sync would otherwise outlast.
		l.release(p.UID)
	}
	for _, p := range ch.Added {
		l.admitAndRun(ctx, p)
	}
	for _, p := range ch.Updated {
		if !l.pods.Rejected(p.UID) {
			l.dispatch(p)
		}
	}
}

// dispatch gives a known pod's latest version to its worker: a pod being
// deleted is terminated with its deletion grace period.
func (l *mainLoop) dispatch(p *v1.Pod) {
	if p.DeletionTimestamp != nil {
		l.workers.Terminate(p.UID, p, nil, p.DeletionGracePeriodSeconds)
		return
	}
	l.workers.Sync(p)
}

// admitAndRun admits a new pod and starts its worker, or records why not.
func (l *mainLoop) admitAndRun(ctx context.Context, p *v1.Pod) {
	logger := klog.FromContext(ctx)
	if l.offline != nil && l.offline.Restored(p.UID) {
		logger.Info("Running a pod from the offline checkpoint", "pod", klog.KObj(p), "podUID", p.UID)
		l.workers.Forget(p.UID)
		l.dispatch(p)
		return
	}
	if l.admissionNode() == nil {
		// The Node is not registered yet: admit once its allocatable is known.
		l.pending = append(l.pending, p)
		return
	}
	if r := l.admission.Admit(ctx, admission.Attributes{Pod: p, OtherPods: l.view.Active(p.UID)}); !r.Admit {
		logger.Info("Pod rejected by admission", "pod", klog.KObj(p), "reason", r.Reason, "message", r.Message)
		l.pods.Reject(p.UID)
		l.recorder.Event(p, v1.EventTypeWarning, r.Reason, r.Message)
		st := *p.Status.DeepCopy()
		st.Phase, st.Reason, st.Message = v1.PodFailed, r.Reason, r.Message
		l.statuses.Set(ctx, p, st)
		return
	}
	logger.Info("Pod added", "pod", klog.KObj(p), "podUID", p.UID)
	// The same UID may have run and finished before (a manifest removed and
	// put back).
	l.workers.Forget(p.UID)
	l.dispatch(p)
}

// admitPending admits the pods that waited for the Node and are still
// wanted as they were.
func (l *mainLoop) admitPending(ctx context.Context) {
	if len(l.pending) == 0 || l.admissionNode() == nil {
		return
	}
	pending := l.pending
	l.pending = nil
	for _, p := range pending {
		if cur, ok := l.pods.Get(p.UID); ok && cur == p {
			l.admitAndRun(ctx, p)
		}
	}
}

// pendingPods are the pods waiting for the Node (called from the main
// loop only: device allocation runs in admission).
func (l *mainLoop) pendingPods() []*v1.Pod { return l.pending }

// onTerminated is told by a pod's worker that it finished terminating the
// pod. The same pod may have come back meanwhile: it runs again.
// Otherwise the worker's memory of the finished pod stays until
// housekeeping sees the runtime no longer has it, so a stale relist cannot
// start a second termination.
func (l *mainLoop) onTerminated(uid types.UID) {
	if p, ok := l.pods.Get(uid); ok && p.DeletionTimestamp == nil {
		l.workers.Forget(uid)
		l.workers.Sync(p)
	}
}

// housekeeping admits pods that waited for the Node, stops runtime pods
// nobody wants and removes what pods that are gone left (directories,
// logs, cgroups). Stopping and removing wait for every source to have
// been seen, so pods are never killed just because their source (the API
// server) is slow or unreachable.
func (l *mainLoop) housekeeping(ctx context.Context) {
	l.admitPending(ctx)
	if !l.sourcesReady.IsReady() {
		return
	}
	running, ok := l.relisted()
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	inRuntime := map[types.UID]bool{}
	for _, rp := range running {
		inRuntime[rp.UID] = true
		if l.view.Wanted(rp.UID) {
			continue
		}
		logger.Info("Found a pod in the runtime that is not desired; terminating it", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		l.workers.Terminate(rp.UID, nil, rp, nil)
	}
	for _, uid := range l.workers.Finished() {
		if !inRuntime[uid] {
			l.workers.Forget(uid)
		}
	}
	keep := func(uid types.UID) bool { return l.view.Known(uid, inRuntime) }
	lo := l.leftovers
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
	lo.GCBackoff()
}
