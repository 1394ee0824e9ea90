package nodelet

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/shutdown"
)

// newShutdown is the graceful node shutdown manager of the configuration's
// periods, nil when they are all zero (graceful shutdown off, as upstream).
func (n *Nodelet) newShutdown() (*shutdown.Manager, error) {
	cfg := &n.opts.Config
	periods := shutdown.Periods(cfg.ShutdownGracePeriodByPodPriority, cfg.ShutdownGracePeriod.Duration, cfg.ShutdownGracePeriodCriticalPods.Duration)
	if len(periods) == 0 {
		return nil, nil
	}
	return shutdown.New(shutdown.Config{
		Periods:    periods,
		ActivePods: n.shutdownPods,
		Stopper:    shutdownStopper{n},
		NodeChanged: func() {
			if n.nodeStatus != nil {
				n.nodeStatus.Refresh()
			}
		},
		Recorder:  n.recorder,
		Node:      n.nodeRef(),
		StateFile: filepath.Join(n.opts.RootDir, shutdown.StateFile),
		Clock:     n.clock,
	})
}

// shuttingDown is the node's not-ready reason while the machine shuts down.
func (n *Nodelet) shuttingDown() error {
	if n.shutdown == nil {
		return nil
	}
	return n.shutdown.ShuttingDown()
}

// shutdownPods are the pods a shutdown stops, as upstream's active pods:
// admitted, not finished, with a live worker, those being deleted
// included (their stop is waited for, and shortened to their group's).
func (n *Nodelet) shutdownPods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range n.pods.Admitted("") {
		if podspec.IsTerminal(p.Status.Phase) || !n.workers.Live(p.UID) {
			continue
		}
		if st, ok := n.statuses.Get(p.UID); ok && podspec.IsTerminal(st.Phase) {
			continue
		}
		out = append(out, p)
	}
	return out
}

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
