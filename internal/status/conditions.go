package status

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Reasons of the conditions nodelet owns, as upstream's
// (pkg/kubelet/status/generate.go, pkg/kubelet/types).
const (
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	ReasonPodSandboxNotReady       = "PodSandboxNotReady"
)

// findStatus returns the status of container name, if any.
func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

// notReadyMessage is upstream's message naming the unknown containers and
// the others (unready, incomplete).
func notReadyMessage(unknown, others []string, what string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(others) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", what, others))
	}
	return strings.Join(msgs, ", ")
}

// ContainersReadyCondition is True when every app container and every
// sidecar is ready; in a terminal phase it is False with PodCompleted or
// PodFailed. statuses are the init and app containers' statuses.
func ContainersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if statuses == nil {
		c.Reason = ReasonUnknownContainerStatuses
		return c
	}
	var unknown, unready []string
	check := func(name string) {
		if s, ok := findStatus(statuses, name); !ok {
			unknown = append(unknown, name)
		} else if !s.Ready {
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			check(pod.Spec.InitContainers[i].Name)
		}
	}
	for _, ct := range pod.Spec.Containers {
		check(ct.Name)
	}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		c.Reason = ReasonPodCompleted
	case phase == v1.PodFailed:
		c.Reason = ReasonPodFailed
	case len(unknown) > 0 || len(unready) > 0:
		c.Reason, c.Message = ReasonContainersNotReady, notReadyMessage(unknown, unready, "unready")
	default:
		c.Status = v1.ConditionTrue
	}
	return c
}

// PodReadyCondition is ContainersReady's verdict, and then True only if
// every readiness gate's condition (in conditions) is True.
func PodReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := ContainersReadyCondition(pod, statuses, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		if c := findCondition(conditions, g.ConditionType); c == nil {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		} else if c.Status != v1.ConditionTrue {
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReasonReadinessGatesNotReady, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// InitializedCondition is True once every init container completed (a
// sidecar: started), or once any app container started; a succeeded pod
// is initialized with PodCompleted.
func InitializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse}
	if statuses == nil && len(pod.Spec.InitContainers) > 0 {
		c.Reason = ReasonUnknownContainerStatuses
		return c
	}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		s, ok := findStatus(statuses, ic.Name)
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case podspec.IsSidecar(ic) && (s.Started == nil || !*s.Started):
			incomplete = append(incomplete, ic.Name)
		case !podspec.IsSidecar(ic) && !s.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		c.Status, c.Reason = v1.ConditionTrue, ReasonPodCompleted
		return c
	}
	if anyAppContainerStarted(pod, statuses) {
		// Initialized before: restarting sidecars do not undo it.
		c.Status = v1.ConditionTrue
		return c
	}
	if msg := notReadyMessage(unknown, incomplete, "incomplete"); msg != "" {
		c.Reason, c.Message = ReasonContainersNotInitialized, msg
		return c
	}
	c.Status = v1.ConditionTrue
	return c
}

func anyAppContainerStarted(pod *v1.Pod, statuses []v1.ContainerStatus) bool {
	for _, ct := range pod.Spec.Containers {
		if s, ok := findStatus(statuses, ct.Name); ok && (s.State.Running != nil || s.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// ReadyToStartContainersCondition is True while the pod has a ready
// sandbox with its network (an IP, or the host's network).
func ReadyToStartContainersCondition(pod *v1.Pod, rs *kubecontainer.PodStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: ReasonPodSandboxNotReady}
	switch {
	case len(rs.Sandboxes) == 0:
		c.Message = "no pod sandbox exists"
	case !rs.SandboxReady():
		c.Message = "pod sandbox is not ready"
	case !pod.Spec.HostNetwork && len(rs.IPs) == 0:
		c.Message = "pod sandbox has no IP address"
	default:
		return v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	}
	return c
}

// NotReadyWhenTerminal makes a status the node put in a terminal phase
// while its containers still run (an eviction, a node shutdown) say so:
// no container ready, ContainersReady and Ready False with the phase's
// reason, never Failed and Ready at once (upstream #108594).
func NotReadyWhenTerminal(st *v1.PodStatus, now time.Time) {
	if !podspec.IsTerminal(st.Phase) {
		return
	}
	reason := ReasonPodFailed
	if st.Phase == v1.PodSucceeded {
		reason = ReasonPodCompleted
	}
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			list[i].Ready = false
		}
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if (c.Type == v1.ContainersReady || c.Type == v1.PodReady) && c.Status == v1.ConditionTrue {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionFalse, reason, "", metav1.NewTime(now)
		}
	}
}
