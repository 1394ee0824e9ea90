package podsync

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/pleg"
)

// observed remembers, per pod, the sandboxes the pod's last sync saw ready
// and the containers it saw running when it read the runtime after its own
// changes. A PLEG event that reports one of them in that very state carries
// nothing the worker does not know: the sync that started a container
// already saw it running, so the relist that finds it running later need not
// sync the pod again. In a burst of pods this cuts the syncs to a third
// (each pod's sandbox and container start came back as two events, each a
// sync with its runtime reads).
//
// Only running and ready are remembered: a sync decides from what it read
// before its changes, so a container that already exited when it read again
// (an init container that finished at once) still needs the sync its exit
// event brings. Removals, and anything the sync did not see, always wake the
// worker.
//
// Pod workers write (record, forget); the main loop reads (redundant).
type observed struct {
	pods sync.Map // types.UID -> map[string]bool (IDs seen running or ready), never changed once stored
}

var (
	runningState = runtimeapi.ContainerState_CONTAINER_RUNNING.String()
	readyState   = runtimeapi.PodSandboxState_SANDBOX_READY.String()
)

// record stores what a sync of the pod saw.
func (o *observed) record(rs *kubecontainer.PodStatus) {
	if rs == nil {
		return
	}
	seen := make(map[string]bool, len(rs.Sandboxes)+len(rs.Containers))
	for _, s := range rs.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			seen[s.Id] = true
		}
	}
	for _, c := range rs.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			seen[c.ID] = true
		}
	}
	o.pods.Store(rs.UID, seen)
}

// forget drops the pod: its worker stops or terminates it, so every event
// about it matters.
func (o *observed) forget(uid types.UID) { o.pods.Delete(uid) }

// redundant tells whether the pod's last sync already saw what e reports.
func (o *observed) redundant(e *pleg.Event) bool {
	if e.State != runningState && e.State != readyState {
		return false
	}
	seen, ok := o.pods.Load(e.ID)
	return ok && seen.(map[string]bool)[e.Data]
}
