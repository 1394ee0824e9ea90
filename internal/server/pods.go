package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/volumes"
)

// Pods gives the pods the node runs, with their latest status
// (podmanager.View). Safe for concurrent use.
type Pods interface {
	Pods() []*v1.Pod
	PodByName(namespace, name string) (*v1.Pod, bool)
}

// PodRuntime is what the server reads of the pods in the runtime
// (kuberuntime.Manager). Safe for concurrent use.
type PodRuntime interface {
	// GetPodStatus reads the pod's sandboxes and containers afresh.
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubecontainer.PodStatus, error)
	// BackoffDelay is a container's restart back-off and whether it is in
	// back-off since its last exit at finishedAt.
	BackoffDelay(pod *v1.Pod, c *v1.Container, finishedAt time.Time) (time.Duration, bool)
}

// runningPods is what the runtime runs, as pods (name, namespace, UID and
// running containers), also for pods nodelet no longer wants: the last
// relist's view (at most a relist period old), so /runningpods/ costs the
// runtime nothing.
func (s *Server) runningPods() ([]*v1.Pod, error) {
	if s.cfg.Relisted == nil {
		return nil, fmt.Errorf("the container runtime is not listed")
	}
	running, ok := s.cfg.Relisted()
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

// runningContainerID is the CRI ID of a running container of the pod,
// read from the runtime afresh: a container that has just started may not
// be in the last relist yet.
func (s *Server) runningContainerID(ctx context.Context, pod *v1.Pod, container string) (string, error) {
	st, err := s.cfg.PodRuntime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", err
	}
	if c := st.Latest(container); c != nil && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		return c.ID, nil
	}
	return "", fmt.Errorf("container not found (%q)", container)
}

// sandboxID is the CRI ID of the pod's ready sandbox.
func (s *Server) sandboxID(ctx context.Context, pod *v1.Pod) (string, error) {
	st, err := s.cfg.PodRuntime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", err
	}
	if len(st.Sandboxes) == 0 || st.Sandboxes[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("pod %q has no running sandbox", pod.Name)
	}
	return st.Sandboxes[0].Id, nil
}

// containerLog is the CRI ID and log path of the container instance whose
// log to read: logID's choice, its log path from the runtime.
func (s *Server) containerLog(ctx context.Context, pod *v1.Pod, container string, previous bool) (string, string, error) {
	id, err := logID(pod, container, previous)
	if err != nil {
		return "", "", err
	}
	resp, err := s.runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return "", "", fmt.Errorf("container %q in pod %q: %w", container, pod.Name, err)
	}
	return id, resp.GetStatus().GetLogPath(), nil
}

// logID picks the container instance whose log to read the way upstream
// does, from the pod's status: previous is the last terminated instance;
// otherwise the running one, else the terminated one. The error says why
// there is none, in upstream's words.
func logID(pod *v1.Pod, container string, previous bool) (string, error) {
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == container {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name)
	}
	last, state := cs.LastTerminationState.Terminated, cs.State
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		id = last.ContainerID
	case state.Running != nil:
		id = cs.ContainerID
	case state.Terminated != nil && state.Terminated.ContainerID != "":
		id = state.Terminated.ContainerID
	case last != nil && last.ContainerID != "":
		id = last.ContainerID
	case state.Terminated != nil:
		return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
	case state.Waiting != nil:
		reason := state.Waiting.Reason
		switch reason {
		case "ErrImagePull":
			reason = "image can't be pulled"
		case "ImagePullBackOff":
			reason = "trying and failing to pull image"
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %s", container, pod.Name, reason)
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name)
	}
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	return id, nil
}

// details is what the local API tells of a pod beyond its status: its
// source (checkpoint while a pod restored from the offline checkpoint is
// not yet confirmed by the API server), the containers waiting out a
// restart back-off, and its volumes' states.
func (s *Server) details(pod *v1.Pod) PodDetails {
	d := PodDetails{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Source: PodSource(pod)}
	if s.cfg.Restored != nil && s.cfg.Restored(pod.UID) {
		d.Source = SourceCheckpoint
	}
	if s.cfg.PodRuntime != nil {
		d.BackOff = backOffs(pod, s.clock.Now(), func(c *v1.Container, finishedAt time.Time) (time.Duration, bool) {
			return s.cfg.PodRuntime.BackoffDelay(pod, c, finishedAt)
		})
	}
	if s.cfg.VolumeStates != nil {
		d.Volumes = volumeStates(pod, s.cfg.VolumeStates(pod.UID))
	}
	return d
}

// backOffs are the pod's containers in CrashLoopBackOff still to wait at
// now, by their back-off (delay: the runtime's back-off of a container and
// whether it is in back-off since its last exit).
func backOffs(pod *v1.Pod, now time.Time, delay func(*v1.Container, time.Time) (time.Duration, bool)) []ContainerBackOff {
	specs := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		specs[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		specs[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	var out []ContainerBackOff
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			last := cs.LastTerminationState.Terminated
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != kubecontainer.ReasonCrashLoopBackOff || last == nil || specs[cs.Name] == nil {
				continue
			}
			d, in := delay(specs[cs.Name], last.FinishedAt.Time)
			if until := last.FinishedAt.Add(d); in && until.After(now) {
				out = append(out, ContainerBackOff{Container: cs.Name, Delay: metav1.Duration{Duration: d}, Until: metav1.NewTime(until)})
			}
		}
	}
	return out
}

// volumeStates are the pod's volumes in its spec's order with what their
// last set-up did (states, by volume name).
func volumeStates(pod *v1.Pod, states map[string]volumes.State) []VolumeState {
	out := make([]VolumeState, 0, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		vs := VolumeState{Name: v.Name, Kind: volumes.Kind(v), State: VolumePending}
		if st, ok := states[v.Name]; ok {
			vs.Path = st.Path
			if !st.SetUpAt.IsZero() {
				vs.State = VolumeReady
				t := metav1.NewTime(st.SetUpAt)
				vs.SetUpAt = &t
			}
			if st.Err != "" {
				vs.State, vs.Error = VolumeFailed, st.Err
				t := metav1.NewTime(st.ErrAt)
				vs.ErrAt = &t
			}
		}
		out = append(out, vs)
	}
	return out
}
