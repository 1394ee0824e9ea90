package nodelet

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
		Periods: periods,
		// As upstream's active pods: those being deleted included (their
		// stop is waited for, and shortened to their group's).
		ActivePods: n.livePods,
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
