package nodelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/server"
	"github.com/nodelet/nodelet/internal/volumes"
)

// podDetails is what the local API tells of a pod beyond its status: its
// source (checkpoint while a pod restored from the offline checkpoint is
// not yet confirmed by the API server), the containers waiting out a
// restart back-off, and its volumes' states.
func (h apiHost) podDetails(pod *v1.Pod) server.PodDetails {
	d := server.PodDetails{Source: server.PodSource(pod)}
	if h.n.offline != nil && h.n.offline.Restored(pod.UID) {
		d.Source = server.SourceCheckpoint
	}
	d.BackOff = backOffs(pod, h.n.clock.Now(), func(c *v1.Container, finishedAt time.Time) (time.Duration, bool) {
		return h.n.runtime.BackoffDelay(pod, c, finishedAt)
	})
	d.Volumes = volumeStates(pod, h.n.volumes.States(pod.UID))
	return d
}

// backOffs are the pod's containers in CrashLoopBackOff still to wait at
// now, by their back-off (delay: the runtime's back-off of a container and
// whether it is in back-off since its last exit).
func backOffs(pod *v1.Pod, now time.Time, delay func(*v1.Container, time.Time) (time.Duration, bool)) []server.ContainerBackOff {
	specs := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		specs[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
	}
	for i := range pod.Spec.Containers {
		specs[pod.Spec.Containers[i].Name] = &pod.Spec.Containers[i]
	}
	var out []server.ContainerBackOff
	for _, statuses := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			last := cs.LastTerminationState.Terminated
			if cs.State.Waiting == nil || cs.State.Waiting.Reason != kubecontainer.ReasonCrashLoopBackOff || last == nil || specs[cs.Name] == nil {
				continue
			}
			d, in := delay(specs[cs.Name], last.FinishedAt.Time)
			if until := last.FinishedAt.Add(d); in && until.After(now) {
				out = append(out, server.ContainerBackOff{Container: cs.Name, Delay: metav1.Duration{Duration: d}, Until: metav1.NewTime(until)})
			}
		}
	}
	return out
}

// volumeStates are the pod's volumes in its spec's order with what their
// last set-up did (states, by volume name).
func volumeStates(pod *v1.Pod, states map[string]volumes.State) []server.VolumeState {
	out := make([]server.VolumeState, 0, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		vs := server.VolumeState{Name: v.Name, Kind: volumes.Kind(v), State: server.VolumePending}
		if st, ok := states[v.Name]; ok {
			vs.Path = st.Path
			if !st.SetUpAt.IsZero() {
				vs.State = server.VolumeReady
				t := metav1.NewTime(st.SetUpAt)
				vs.SetUpAt = &t
			}
			if st.Err != "" {
				vs.State, vs.Error = server.VolumeFailed, st.Err
				t := metav1.NewTime(st.ErrAt)
				vs.ErrAt = &t
			}
		}
		out = append(out, vs)
	}
	return out
}
