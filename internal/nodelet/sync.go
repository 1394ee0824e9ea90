package nodelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/status"
)

// SyncPod implements podworkers.Syncer: it brings one pod to its spec and
// records its status.
func (n *Nodelet) SyncPod(ctx context.Context, pod *v1.Pod) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	start := n.clock.Now()
	op := "sync"
	if _, known := n.statuses.Get(pod.UID); !known {
		op = "create"
		n.firstSeen.LoadOrStore(pod.UID, start)
	}
	defer func() { metrics.PodWorkerDuration.WithLabelValues(op).Observe(n.clock.Since(start).Seconds()) }()
	if n.mirrors != nil && podspec.IsStatic(pod) {
		if err := n.mirrors.Ensure(ctx, pod); err != nil {
			logger.Error(err, "Cannot create the mirror pod", "pod", klog.KObj(pod))
		}
	}
	rs, err := n.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return 0, err
	}
	// A pod the API already reports as finished never runs again, even if
	// the runtime lost its containers; its API status is final.
	if isTerminal(pod.Status.Phase) {
		return 0, n.runtime.KillPod(ctx, pod, kuberuntime.RunningFromStatus(rs, nil), nil)
	}
	if exceeded, _ := n.pastActiveDeadline(pod); exceeded {
		return 0, n.failPastDeadline(ctx, pod, rs)
	}
	var res kubecontainer.SyncResult
	paths, err := n.volumes.Setup(ctx, pod)
	if err != nil {
		msg := fmt.Sprintf("MountVolume.SetUp failed: %v", err)
		n.recorder.Event(pod, v1.EventTypeWarning, "FailedMount", msg)
		for _, c := range pod.Spec.Containers {
			if cs := rs.Latest(c.Name); cs == nil {
				res.Waiting = map[string]kubecontainer.Waiting{c.Name: {Reason: kubecontainer.DefaultWaitingReason(pod), Message: msg}}
			}
		}
		n.setStatus(ctx, pod, rs, res)
		// Retried with the pod worker's back-off (200 ms doubling): the usual
		// cause is transient (a token refused until the API server's node
		// authorizer has seen the pod's binding).
		return 0, fmt.Errorf("volumes: %w", err)
	}
	res, err = n.runtime.SyncPod(ctx, pod, rs, kuberuntime.PodEnv{HostIPs: n.hostIPs, VolumePaths: paths, Probes: n.prober})
	if res.Changed && ctx.Err() == nil {
		if fresh, ferr := n.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); ferr == nil {
			rs = fresh
		}
	}
	n.syncProbes(pod, rs)
	n.setStatus(ctx, pod, rs, res)
	n.observed.record(rs)
	next := res.RequeueAfter
	// Synced again when the active deadline passes; asked after setStatus,
	// which gives a new pod its start time (nothing else wakes a running
	// pod's worker in time: the PLEG's events about what this sync started
	// carry nothing new).
	if _, left := n.pastActiveDeadline(pod); left > 0 && (next == 0 || left < next) {
		next = left
	}
	return next, err
}

// syncProbes gives the prober the pod's running app containers.
func (n *Nodelet) syncProbes(pod *v1.Pod, rs *kubecontainer.PodStatus) {
	var running []prober.Container
	add := func(c *v1.Container) {
		if cs := rs.Latest(c.Name); cs != nil && cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running = append(running, prober.Container{Spec: c, ID: cs.ID, StartedAt: cs.StartedAt})
		}
	}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i]) // sidecars are probed like app containers
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	podIP := ""
	if len(rs.IPs) > 0 {
		podIP = rs.IPs[0]
	} else if pod.Spec.HostNetwork && len(n.hostIPs) > 0 {
		podIP = n.hostIPs[0]
	}
	n.prober.Sync(n.ctx, pod, podIP, running)
}

// setStatus computes and records the pod's status. The first status of an
// API pod continues from what the API has (start time, transition times,
// a terminal phase).
func (n *Nodelet) setStatus(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus, res kubecontainer.SyncResult) v1.PodStatus {
	var prev *v1.PodStatus
	if old, ok := n.statuses.Get(pod.UID); ok {
		prev = &old
	} else if pod.Status.Phase != "" && !podspec.IsStatic(pod) {
		prev = pod.Status.DeepCopy()
	}
	st := status.Generate(status.Input{
		Pod: pod, Runtime: rs, Sync: res, Previous: prev, HostIPs: n.hostIPs, RuntimeName: n.runtimeName, Now: n.clock.Now(),
		Probes: n.prober,
	})
	if prev == nil || !apiequality.Semantic.DeepEqual(*prev, st) {
		n.statuses.Set(ctx, pod, st)
	}
	if st.Phase == v1.PodRunning {
		if seen, ok := n.firstSeen.LoadAndDelete(pod.UID); ok {
			metrics.PodStartDuration.Observe(n.clock.Since(seen.(time.Time)).Seconds())
		}
	}
	return st
}

// StopPod implements podworkers.Syncer: it stops the pod gracefully.
func (n *Nodelet) StopPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, grace *int64) error {
	logger := klog.FromContext(ctx)
	uid, name, ns := podIdentity(pod, running)
	n.prober.RemovePod(uid)
	n.firstSeen.Delete(uid)
	n.observed.forget(uid)
	rs, err := n.runtime.GetPodStatus(ctx, uid, name, ns)
	if err != nil {
		return err
	}
	rp := kuberuntime.RunningFromStatus(rs, running)
	start := n.clock.Now()
	if err := n.runtime.KillPod(ctx, pod, rp, grace); err != nil {
		return err
	}
	logger.Info("Pod stopped", "pod", klog.KRef(ns, name), "podUID", uid, "took", n.clock.Since(start).Round(time.Millisecond))
	return nil
}

// CleanupPod implements podworkers.Syncer: it removes a stopped pod's
// sandboxes, containers, logs and directories. A pod deleted in the API
// gets its final status written and is then deleted for good; a static
// pod's mirror pod is deleted.
func (n *Nodelet) CleanupPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod) error {
	logger := klog.FromContext(ctx)
	uid, name, ns := podIdentity(pod, running)
	// What is left after stopping: every sandbox and container, stopped.
	rs, err := n.runtime.GetPodStatus(ctx, uid, name, ns)
	if err != nil {
		return err
	}
	if pod != nil && n.syncer != nil && pod.DeletionTimestamp != nil && !podspec.IsStatic(pod) {
		final := n.setStatus(ctx, pod, rs, kubecontainer.SyncResult{})
		final.Phase = finalPhase(final)
		if err := n.syncer.Finish(ctx, pod, final); err != nil {
			return err
		}
	}
	if pod != nil && n.mirrors != nil && podspec.IsStatic(pod) {
		if err := n.mirrors.Delete(ctx, pod); err != nil {
			logger.Error(err, "Cannot delete the mirror pod", "pod", klog.KObj(pod))
		}
	}
	if err := n.runtime.RemovePod(ctx, kuberuntime.RunningFromStatus(rs, running)); err != nil {
		return err
	}
	n.removePodCgroups(ctx, uid)
	if err := n.volumes.Teardown(uid); err != nil {
		return err
	}
	if pod != nil {
		n.puller.Forget(pod)
	}
	if n.apiGetter != nil {
		n.apiGetter.Forget(uid)
	}
	n.statuses.Delete(uid)
	return nil
}

// finalPhase is the phase of a pod whose containers were all stopped:
// Succeeded when every container exited 0, Failed otherwise.
func finalPhase(st v1.PodStatus) v1.PodPhase {
	if isTerminal(st.Phase) {
		return st.Phase
	}
	for _, c := range st.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
			return v1.PodFailed
		}
	}
	return v1.PodSucceeded
}

func podIdentity(pod *v1.Pod, running *kubecontainer.RunningPod) (uid types.UID, name, ns string) {
	if pod != nil {
		return pod.UID, pod.Name, pod.Namespace
	}
	return running.UID, running.Name, running.Namespace
}

// pastActiveDeadline reports whether the pod has run longer than its
// activeDeadlineSeconds (counted from its start time, as upstream), or how
// long it has left (0 without a deadline).
func (n *Nodelet) pastActiveDeadline(pod *v1.Pod) (bool, time.Duration) {
	d := pod.Spec.ActiveDeadlineSeconds
	if d == nil {
		return false, 0
	}
	st, ok := n.statuses.Get(pod.UID)
	if !ok || st.StartTime == nil {
		return false, 0
	}
	left := st.StartTime.Add(time.Duration(*d) * time.Second).Sub(n.clock.Now())
	return left <= 0, left
}

// failPastDeadline stops a pod past its active deadline and reports it
// Failed with reason DeadlineExceeded, as upstream.
func (n *Nodelet) failPastDeadline(ctx context.Context, pod *v1.Pod, rs *kubecontainer.PodStatus) error {
	const msg = "Pod was active on the node longer than the specified deadline"
	if st, _ := n.statuses.Get(pod.UID); st.Reason != reasonDeadlineExceeded {
		n.recorder.Event(pod, v1.EventTypeNormal, reasonDeadlineExceeded, msg)
	}
	fail := func(rs *kubecontainer.PodStatus) {
		st := n.setStatus(ctx, pod, rs, kubecontainer.SyncResult{})
		st.Phase, st.Reason, st.Message = v1.PodFailed, reasonDeadlineExceeded, msg
		n.statuses.Set(ctx, pod, st)
	}
	// Reported Failed at once, as upstream; the containers stop after.
	fail(rs)
	n.prober.RemovePod(pod.UID)
	err := n.runtime.KillPod(ctx, pod, kuberuntime.RunningFromStatus(rs, nil), nil)
	if fresh, ferr := n.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); ferr == nil {
		fail(fresh)
	}
	return err
}

const reasonDeadlineExceeded = "DeadlineExceeded"
