package nodelet

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// apiHost is what the kubelet API (internal/server) reads of nodelet: the
// pod manager, the status store and the runtime. Safe for concurrent use.
type apiHost struct{ n *Nodelet }

func (h apiHost) withStatus(p *v1.Pod) *v1.Pod {
	if st, ok := h.n.statuses.Get(p.UID); ok {
		p = p.DeepCopy()
		p.Status = st
	}
	return p
}

func (h apiHost) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range h.n.pods.Admitted("") {
		out = append(out, h.withStatus(p))
	}
	return out
}

func (h apiHost) PodByName(namespace, name string) (*v1.Pod, bool) {
	p, ok := h.n.pods.GetByName(namespace, name)
	if !ok {
		return nil, false
	}
	return h.withStatus(p), true
}

// RunningPods is the last relist's view (at most a relist period old), so
// the API costs the runtime nothing.
func (h apiHost) RunningPods() ([]*v1.Pod, error) {
	running, ok := h.n.pleg.RunningPods()
	if !ok {
		return nil, fmt.Errorf("the container runtime has not been listed yet")
	}
	var out []*v1.Pod
	for _, rp := range running {
		if !rp.Running() {
			continue
		}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
		for _, c := range rp.Containers {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.GetMetadata().GetName(), Image: c.GetImage().GetImage()})
		}
		out = append(out, p)
	}
	return out, nil
}

// RunningContainerID reads the runtime afresh: a container that has just
// started may not be in the last relist yet.
func (h apiHost) RunningContainerID(ctx context.Context, pod *v1.Pod, container string) (string, error) {
	st, err := h.n.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", err
	}
	if c := st.Latest(container); c != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		return c.ID, nil
	}
	return "", fmt.Errorf("container not found (%q)", container)
}

func (h apiHost) SandboxID(ctx context.Context, pod *v1.Pod) (string, error) {
	st, err := h.n.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", err
	}
	if len(st.Sandboxes) == 0 || st.Sandboxes[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("pod %q has no running sandbox", pod.Name)
	}
	return st.Sandboxes[0].Id, nil
}

// ContainerLog picks the container instance whose log to read the way
// upstream does, from the pod's status: previous is the last terminated
// instance; otherwise the running one, else the terminated one.
func (h apiHost) ContainerLog(ctx context.Context, pod *v1.Pod, container string, previous bool) (string, string, error) {
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", "", fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name)
	}
	last, state := cs.LastTerminationState.Terminated, cs.State
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		id = last.ContainerID
	case state.Running != nil:
		id = cs.ContainerID
	case state.Terminated != nil && state.Terminated.ContainerID != "":
		id = state.Terminated.ContainerID
	case last != nil && last.ContainerID != "":
		id = last.ContainerID
	case state.Terminated != nil:
		return "", "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
	case state.Waiting != nil:
		reason := state.Waiting.Reason
		switch reason {
		case "ErrImagePull":
			reason = "image can't be pulled"
		case "ImagePullBackOff":
			reason = "trying and failing to pull image"
		}
		return "", "", fmt.Errorf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason)
	default:
		return "", "", fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name)
	}
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	resp, err := h.n.runtime.Runtime().ContainerStatus(ctx, id, false)
	if err != nil {
		return "", "", fmt.Errorf("container %q in pod %q: %w", container, pod.Name, err)
	}
	return id, resp.GetStatus().GetLogPath(), nil
}
