package podsync

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/status"
)

// eviction is a pod the node stops on its own (the eviction manager, a
// node shutdown): the grace period and what to make of its status, whether
// its resources are to be freed too, and whether that is done.
type eviction struct {
	grace  int64
	status func(*v1.PodStatus)
	// keep: stop the containers only (a node shutdown), as upstream's kill
	// does; an eviction removes them and the volumes to free the node.
	keep bool
	done atomic.Bool
}

// Evict asks for the pod to be stopped within grace seconds at its next
// sync and reported with status applied (phase Failed, reason Evicted, the
// DisruptionTarget condition), as upstream's kill with a status function;
// its containers and volumes are then removed, which frees what it held on
// the node. The caller wakes the pod's worker.
func (s *Syncer) Evict(uid types.UID, grace int64, status func(*v1.PodStatus)) {
	s.evictions.LoadOrStore(uid, &eviction{grace: grace, status: status})
}

// Shutdown asks for the pod to be stopped within grace seconds at its next
// sync and reported with status applied (the node shutdown's Failed,
// Terminated): its containers stay, as after upstream's kill. The caller
// wakes the pod's worker.
func (s *Syncer) Shutdown(uid types.UID, grace int64, status func(*v1.PodStatus)) {
	s.evictions.LoadOrStore(uid, &eviction{grace: grace, status: status, keep: true})
}

// Evicted reports whether a pod given to Evict or Shutdown is done: its
// containers stopped and, for an eviction, its containers and volumes
// removed.
func (s *Syncer) Evicted(uid types.UID) bool {
	v, ok := s.evictions.Load(uid)
	return ok && v.(*eviction).done.Load()
}

// evict stops a pod the eviction manager chose (see Evict).
func (s *Syncer) evict(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, ev *eviction) error {
	if ev.done.Load() {
		return nil
	}
	logger := klog.FromContext(ctx)
	s.fail(ctx, pod, rs, ev.status, false)
	s.cfg.Prober.RemovePod(pod.UID)
	grace := ev.grace
	if err := s.cfg.Runtime.KillPod(ctx, pod, kuberuntime.RunningFromStatus(rs, nil), &grace); err != nil {
		return err
	}
	fresh, err := s.cfg.Runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	if err := s.unprepare(ctx, pod); err != nil {
		return err
	}
	s.fail(ctx, pod, fresh, ev.status, true)
	if ev.keep {
		// Its volumes are unmounted, as upstream waits for before the next
		// group (a CSI driver there may still be needed to unmount them).
		if err := s.cfg.Volumes.Teardown(pod.UID); err != nil {
			return err
		}
		ev.done.Store(true)
		logger.Info("Pod stopped for the node shutdown", "pod", klog.KObj(pod), "podUID", pod.UID, "gracePeriod", grace)
		return nil
	}
	// What the pod held on the node goes now, as upstream's container
	// garbage collection and volume manager do for an evicted pod: its
	// writable layers, logs and volumes. Its status stays.
	err = errors.Join(
		s.cfg.Runtime.RemovePod(ctx, kuberuntime.RunningFromStatus(fresh, nil)),
		s.cfg.Volumes.Teardown(pod.UID),
		s.cfg.Cgroups.RemovePod(ctx, pod.UID),
	)
	if err != nil {
		return err
	}
	ev.done.Store(true)
	logger.Info("Pod evicted", "pod", klog.KObj(pod), "podUID", pod.UID, "gracePeriod", grace)
	return nil
}

// fail records the pod's status as generated from rs, with apply applied,
// for a pod the node stops itself (active deadline, eviction, shutdown):
// not ready at once; Failed once no container runs. With killed (the
// containers of an evicted pod stopped for good), the phase is upstream's
// for a terminal pod: Succeeded when every container exited 0 (not for a
// static pod), Failed otherwise, and apply's reason and message are kept
// only with the phase they came with; its DisruptionTarget stays.
func (s *Syncer) fail(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, apply func(*v1.PodStatus), killed bool) {
	st := s.generate(ctx, pod, rs, kubecontainer.SyncResult{}, s.previous(pod), killed && !podspec.IsStatic(pod))
	phase, reason, message := st.Phase, st.Reason, st.Message
	hadDisruption := slices.ContainsFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget })
	apply(&st)
	status.NotReadyWhenTerminal(&st, s.clock.Now())
	switch {
	case podspec.IsTerminal(st.Phase) && rs.AnyRunning():
		// Not terminal while a container may run, as upstream's
		// mergePodStatus: the phase (and the DisruptionTarget condition)
		// wait for the containers to stop; readiness goes now.
		st.Phase, st.Reason, st.Message = phase, reason, message
		if !hadDisruption {
			st.Conditions = slices.DeleteFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget })
		}
	case killed && podspec.IsTerminal(phase) && phase != st.Phase:
		// The containers' exits decide (upstream's generateAPIPodStatus
		// after the kill, which does not apply the status function).
		st.Phase, st.Reason, st.Message = phase, reason, message
	}
	s.cfg.Statuses.Set(ctx, pod, st)
}
