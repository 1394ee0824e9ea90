package nodelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The adapters below let the loops beside the pod workers act on pods
// through them: each joins podsync (what the pod's next sync does) and
// podworkers (waking the pod's worker), which know nothing of each other.

// evictor stops evicted pods through their workers (podsync.Evict).
type evictor struct{ n *Nodelet }

func (e evictor) Evict(_ context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	e.n.podsync.Evict(pod.UID, grace, status)
	e.n.workers.Interrupt(pod.UID)
}

// Reclaimed: evicted, or its worker finished (deleted meanwhile).
func (e evictor) Reclaimed(uid types.UID) bool {
	return e.n.podsync.Evicted(uid) || !e.n.workers.Live(uid)
}

// containerReclaim is the eviction manager's node-level reclaim of dead
// containers (the container collector, built after the eviction manager).
type containerReclaim struct{ n *Nodelet }

func (c containerReclaim) Reclaim(ctx context.Context) error { return c.n.containerGC.Reclaim(ctx) }

// shutdownStopper stops pods for the shutdown through their workers
// (podsync.Shutdown): their containers stop, their status says why. A pod
// already being deleted goes on terminating, within the group's grace
// period when that is shorter.
type shutdownStopper struct{ n *Nodelet }

func (s shutdownStopper) Stop(pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	if s.n.workers.Terminating(pod.UID) {
		s.n.workers.Terminate(pod.UID, nil, nil, &grace)
		return
	}
	s.n.podsync.Shutdown(pod.UID, grace, status)
	s.n.workers.Interrupt(pod.UID)
}

// Stopped: its containers stopped, or its worker finished.
func (s shutdownStopper) Stopped(uid types.UID) bool {
	return s.n.podsync.Evicted(uid) || !s.n.workers.Live(uid)
}

// podResourcesPods gives the pod-resources API the pods upstream's does:
// the live ones for List, any admitted one for Get.
type podResourcesPods struct{ n *Nodelet }

func (p podResourcesPods) ActivePods() []*v1.Pod { return p.n.view.Live() }

func (p podResourcesPods) PodByName(namespace, name string) (*v1.Pod, bool) {
	return p.n.pods.GetByName(namespace, name)
}
