package kubecontainer

import (
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Waiting reasons SyncPod reports for containers it did not get running.
const (
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
)

// DefaultWaitingReason is why a container the runtime does not have yet is
// waiting, as upstream: PodInitializing in a pod with init containers (app,
// init and ephemeral containers alike), ContainerCreating otherwise.
func DefaultWaitingReason(pod *v1.Pod) string {
	if len(pod.Spec.InitContainers) > 0 {
		return ReasonPodInitializing
	}
	return ReasonContainerCreating
}

// Waiting says why a container is not running.
type Waiting struct {
	Reason  string
	Message string
}

// SyncResult is what one SyncPod did not manage, for the pod's status.
type SyncResult struct {
	// Waiting maps container names to why nodelet did not (or could not)
	// start them in this sync.
	Waiting map[string]Waiting
	// RequeueAfter asks for another sync when a back-off ends; 0 for none.
	RequeueAfter time.Duration
	// InitFailed: an init container failed under restartPolicy Never.
	InitFailed bool
	// Changed: the sync created, started or stopped something, so the
	// status read before it is stale.
	Changed bool
	// RestartedAll: the sync removed every container of the pod to run
	// them all again (a RestartAllContainers rule), so the containers
	// the runtime no longer has were restarted, not lost.
	RestartedAll bool
	// ResizeError is why actuating the pod's in-place resize failed in
	// this sync (upstream's ResizePodInPlace result), "" when it did not.
	ResizeError string
}

// Wait records why the container named name is not running.
func (r *SyncResult) Wait(name, reason, msg string) {
	if r.Waiting == nil {
		r.Waiting = map[string]Waiting{}
	}
	r.Waiting[name] = Waiting{Reason: reason, Message: msg}
}

// Requeue asks for another sync after d (1 s if d <= 0); the earliest
// request wins.
func (r *SyncResult) Requeue(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if r.RequeueAfter == 0 || d < r.RequeueAfter {
		r.RequeueAfter = d
	}
}

// MinGracePeriod is the shortest grace period a pod is stopped with, in
// seconds, as upstream.
const MinGracePeriod int64 = 2

// GracePeriod picks the grace period for stopping: an override (a deletion's
// grace), else the pod's terminationGracePeriodSeconds, else what the pod was
// started with, else the API default; never below 2 s.
func GracePeriod(pod *v1.Pod, running *RunningPod, override *int64) int64 {
	g := podspec.DefaultGracePeriodSeconds
	switch {
	case override != nil:
		g = *override
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	case running != nil && running.GracePeriod >= 0:
		g = running.GracePeriod
	}
	return max(g, MinGracePeriod)
}

// RestartAllSources are the containers of the pod's newest sandbox that
// exited with an exit code whose restartPolicyRules rule is
// RestartAllContainers: while there are any, the pod's containers are all
// to be restarted in place (upstream's ShouldAllContainersRestart, from
// the runtime's side).
func RestartAllSources(pod *v1.Pod, rs *PodStatus) []string {
	// Every sync asks: most pods have no such rule.
	if len(rs.Sandboxes) == 0 || !podspec.CouldRestartAllContainers(&pod.Spec) {
		return nil
	}
	sandbox := rs.Sandboxes[0].GetId()
	var out []string
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			st := rs.LatestIn(cs[i].Name, sandbox)
			if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED && podspec.RestartsAllContainers(&cs[i], st.ExitCode) {
				out = append(out, cs[i].Name)
			}
		}
	}
	return out
}
