package nodelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/podmanager"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/source/apiserver"
)

// applyAPI folds one API source event into the desired state.
func (n *Nodelet) applyAPI(ctx context.Context, e apiserver.Event) {
	switch e.Op {
	case apiserver.Set:
		n.apply(ctx, n.pods.Set(sourceAPI, e.Pods))
		n.apiSynced(ctx, e.Pods)
		n.sourcesSeen[sourceAPI] = true
		n.checkSourcesReady()
	case apiserver.Add, apiserver.Update:
		for _, p := range e.Pods {
			n.apply(ctx, n.pods.Upsert(sourceAPI, p))
		}
	case apiserver.Delete:
		for _, p := range e.Pods {
			n.apply(ctx, n.pods.Remove(sourceAPI, p))
		}
	}
}

// apply hands what changed in the desired state to the pod workers.
func (n *Nodelet) apply(ctx context.Context, ch podmanager.Changes) {
	logger := klog.FromContext(ctx)
	for _, p := range ch.Removed {
		logger.Info("Pod removed from its source; terminating it", "pod", klog.KObj(p), "podUID", p.UID)
		n.workers.Terminate(p.UID, p, nil, nil)
		// Its devices are free for the next pod at once, as upstream's
		// (its active pods are the pod manager's): the device manager's
		// own pruning waits for every source to be seen once, which a
		// pod deleted during the API's first sync would otherwise outlast.
		n.devices.Release(p.UID)
	}
	for _, p := range ch.Added {
		n.admitAndRun(ctx, p)
	}
	for _, p := range ch.Updated {
		if n.pods.Rejected(p.UID) {
			continue
		}
		n.dispatch(p)
	}
}

// dispatch gives a known pod's latest version to its worker: a pod being
// deleted is terminated with its deletion grace period.
func (n *Nodelet) dispatch(p *v1.Pod) {
	if p.DeletionTimestamp != nil {
		n.workers.Terminate(p.UID, p, nil, p.DeletionGracePeriodSeconds)
		return
	}
	n.workers.Sync(p)
}

// admitAndRun admits a new pod and starts its worker, or records why not.
func (n *Nodelet) admitAndRun(ctx context.Context, p *v1.Pod) {
	logger := klog.FromContext(ctx)
	if n.restoredPod(ctx, p) {
		n.workers.Forget(p.UID)
		n.dispatch(p)
		return
	}
	node := n.admissionNode()
	if node == nil {
		// The Node is not registered yet: admit once its allocatable is known.
		n.pendingAdmission = append(n.pendingAdmission, p)
		return
	}
	if !podspec.IsTerminal(p.Status.Phase) {
		r := n.eviction.Admit(logger, p)
		if r.Admit {
			r = n.sysctls.Admit(p)
		}
		// The devices first, as upstream's resource allocation handler
		// comes before its predicates: a pod asking for devices no longer
		// free is refused UnexpectedAdmissionError.
		if r.Admit {
			r = n.admitDevices(ctx, p)
		}
		if r.Admit {
			r = admission.Admit(n.withDevices(node), p, n.activePods(p))
		}
		if r.Admit && n.shutdown != nil {
			r = n.shutdown.Admit(p)
		}
		if !r.Admit {
			n.devices.Release(p.UID)
			logger.Info("Pod rejected by admission", "pod", klog.KObj(p), "reason", r.Reason, "message", r.Message)
			n.pods.Reject(p.UID)
			n.recorder.Event(p, v1.EventTypeWarning, r.Reason, r.Message)
			st := *p.Status.DeepCopy()
			st.Phase, st.Reason, st.Message = v1.PodFailed, r.Reason, r.Message
			n.statuses.Set(ctx, p, st)
			return
		}
	}
	logger.Info("Pod added", "pod", klog.KObj(p), "podUID", p.UID)
	// The same UID may have run and finished before (a manifest removed and
	// put back).
	n.workers.Forget(p.UID)
	n.dispatch(p)
}

// activePods are the admitted pods that count against the node's resources:
// not terminal, other than except.
func (n *Nodelet) activePods(except *v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range n.pods.Admitted(except.UID) {
		if st, ok := n.statuses.Get(p.UID); ok && podspec.IsTerminal(st.Phase) {
			continue
		}
		if podspec.IsTerminal(p.Status.Phase) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// admitPending admits the pods that waited for the Node.
func (n *Nodelet) admitPending(ctx context.Context) {
	if len(n.pendingAdmission) == 0 || n.admissionNode() == nil {
		return
	}
	pending := n.pendingAdmission
	n.pendingAdmission = nil
	for _, p := range pending {
		if cur, ok := n.pods.Get(p.UID); ok && cur == p {
			n.admitAndRun(ctx, p)
		}
	}
}
