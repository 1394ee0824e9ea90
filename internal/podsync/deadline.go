package podsync

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
)

// ReasonDeadlineExceeded is the reason of a pod stopped for running past
// its activeDeadlineSeconds, and of its event, as upstream.
const ReasonDeadlineExceeded = "DeadlineExceeded"

const deadlineMessage = "Pod was active on the node longer than the specified deadline"

// ActiveDeadline reports whether a pod started at start has run longer than
// its activeDeadlineSeconds at now (counted from its start time, as
// upstream), or how long it has left: 0 without a deadline or a start time.
func ActiveDeadline(pod *v1.Pod, start *metav1.Time, now time.Time) (exceeded bool, left time.Duration) {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil || start == nil {
		return false, 0
	}
	left = start.Add(time.Duration(*d) * time.Second).Sub(now)
	return left <= 0, left
}

// deadline is ActiveDeadline for the pod's recorded status.
func (s *Syncer) deadline(pod *v1.Pod) (bool, time.Duration) {
	st, ok := s.cfg.Statuses.Get(pod.UID)
	if !ok {
		return false, 0
	}
	return ActiveDeadline(pod, st.StartTime, s.clock.Now())
}

// failPastDeadline stops a pod past its active deadline and reports it
// Failed with reason DeadlineExceeded, as upstream: not ready at once,
// Failed once its containers stopped.
func (s *Syncer) failPastDeadline(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus) error {
	if st, _ := s.cfg.Statuses.Get(pod.UID); st.Reason != ReasonDeadlineExceeded {
		s.cfg.Recorder.Event(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, deadlineMessage)
	}
	failed := func(st *v1.PodStatus) {
		st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonDeadlineExceeded, deadlineMessage
	}
	s.fail(ctx, pod, rs, failed, false)
	s.cfg.Prober.RemovePod(pod.UID)
	err := s.cfg.Runtime.KillPod(ctx, pod, kuberuntime.RunningFromStatus(rs, nil), nil)
	if fresh, ferr := s.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); ferr == nil {
		s.fail(ctx, pod, fresh, failed, false)
		if err == nil {
			err = s.releaseIfFinished(ctx, pod, fresh)
		}
	}
	return err
}
