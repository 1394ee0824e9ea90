package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Input is everything a status is computed from.
type Input struct {
	Pod     *v1.Pod
	Runtime *kubecontainer.PodStatus
	Sync    kubecontainer.SyncResult
	// Previous is the status last computed, for transition times, start time
	// and never going backwards; nil for the first.
	Previous *v1.PodStatus
	HostIPs  []string
	// RuntimeName prefixes container IDs ("containerd://...").
	RuntimeName string
	// Probes gives readiness and startup results; nil means no probes.
	Probes Probes
	Now    time.Time
	// SupportsRRO: the pod's runtime handler makes recursive read-only
	// mounts (each container status's volumeMounts say which are).
	SupportsRRO bool
	// Terminal says the node stopped the pod's containers for good (an
	// eviction): once they all stopped it is Succeeded if each exited 0,
	// else Failed, whatever its restart policy (upstream's podIsTerminal).
	Terminal bool
	// ResizeConditions are the pod's PodResizePending and
	// PodResizeInProgress conditions (allocation.Manager), added as they
	// are.
	ResizeConditions []v1.PodCondition
}

// Probes is what status needs of the prober.
type Probes interface {
	Ready(containerID string, hasReadinessProbe bool) bool
	Started(containerID string) bool
}

// Generate computes the pod's API status.
func Generate(in Input) v1.PodStatus {
	pod, rs := in.Pod, in.Runtime
	prev := in.Previous
	if prev == nil {
		prev = &v1.PodStatus{}
	}
	now := apiTime(in.Now)
	st := v1.PodStatus{QOSClass: podspec.QOSClass(pod)}
	if prev.StartTime != nil {
		st.StartTime = prev.StartTime
	} else {
		st.StartTime = &now
	}
	for _, ip := range in.HostIPs {
		st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
	}
	if len(in.HostIPs) > 0 {
		st.HostIP = in.HostIPs[0]
	}
	for _, ip := range rs.IPs {
		st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
	}
	if len(rs.IPs) > 0 {
		st.PodIP = rs.IPs[0]
	} else if pod.Spec.HostNetwork && rs.SandboxReady() {
		st.PodIP = st.HostIP
		for _, ip := range in.HostIPs {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}

	st.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, in, prev.InitContainerStatuses, true)
	st.ContainerStatuses = containerStatuses(pod.Spec.Containers, in, prev.ContainerStatuses, false)
	if n := len(pod.Spec.EphemeralContainers); n > 0 {
		eph := make([]v1.Container, n)
		for i := range pod.Spec.EphemeralContainers {
			eph[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		}
		st.EphemeralContainerStatuses = containerStatuses(eph, in, prev.EphemeralContainerStatuses, false)
	}

	st.Phase = phase(pod, st.InitContainerStatuses, st.ContainerStatuses, in.Sync.InitFailed, appStartedInSandbox(pod, rs), in.Terminal)
	if prev.Phase == v1.PodSucceeded || prev.Phase == v1.PodFailed {
		// Terminal is forever, with the reason it became so (a rejection,
		// an eviction).
		st.Phase, st.Reason, st.Message = prev.Phase, prev.Reason, prev.Message
	}

	// The conditions nodelet owns, in upstream's order; a condition keeps
	// its transition time while its status stays.
	all := append(append(make([]v1.ContainerStatus, 0, len(st.InitContainerStatuses)+len(st.ContainerStatuses)),
		st.InitContainerStatuses...), st.ContainerStatuses...)
	if len(all) == 0 {
		all = nil
	}
	gates := pod.Status.Conditions
	for _, g := range pod.Spec.ReadinessGates {
		// A gate's condition is set by others in the API; the last status
		// computed may know it when the pod object does not yet.
		if findCondition(gates, g.ConditionType) == nil {
			if c := findCondition(prev.Conditions, g.ConditionType); c != nil {
				gates = append(append([]v1.PodCondition{}, gates...), *c)
			}
		}
	}
	conds := []v1.PodCondition{
		ReadyToStartContainersCondition(pod, rs),
		InitializedCondition(pod, all, st.Phase),
		PodReadyCondition(pod, gates, all, st.Phase),
		ContainersReadyCondition(pod, all, st.Phase),
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	if podspec.CouldRestartAllContainers(&pod.Spec) {
		conds = append(conds, AllContainersRestartingCondition(pod, rs, st.Phase))
	}
	for _, c := range conds {
		// The generation of the spec the condition was computed from.
		c.ObservedGeneration = pod.Generation
		c.LastTransitionTime = now
		if old := findCondition(prev.Conditions, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		st.Conditions = append(st.Conditions, c)
	}
	if !podspec.IsTerminal(st.Phase) {
		// As upstream, a finished pod has no resize.
		st.Conditions = append(st.Conditions, in.ResizeConditions...)
	}
	return st
}

// AllContainersRestartingCondition is upstream's AllContainersRestarting
// condition of a pod with a RestartAllContainers rule: True from the exit
// that triggers a reset until its containers are removed.
func AllContainersRestartingCondition(pod *v1.Pod, rs *kubecontainer.PodStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}
	switch {
	case phase == v1.PodSucceeded:
		c.Reason = "PodCompleted"
	case phase == v1.PodFailed:
		c.Reason = "PodFailed"
	case len(kubecontainer.RestartAllSources(pod, rs)) > 0:
		c.Status, c.Reason, c.Message = v1.ConditionTrue, "RestartAllContainersStarted", "container exited with restart policy rule"
	}
	return c
}

// appStartedInSandbox reports whether an app container of the pod's newest
// sandbox exists: its init containers are done (upstream's
// HasAnyActiveRegularContainerStarted).
func appStartedInSandbox(pod *v1.Pod, rs *kubecontainer.PodStatus) bool {
	if len(rs.Sandboxes) == 0 {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if cs := rs.Latest(c.Name); cs != nil && cs.SandboxID == rs.Sandboxes[0].GetId() {
			return true
		}
	}
	return false
}

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func containerStatuses(specs []v1.Container, in Input, prev []v1.ContainerStatus, init bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	rs, sync := in.Runtime, in.Sync
	prefix := in.RuntimeName
	if prefix == "" {
		prefix = "containerd"
	}
	prefix += "://"
	out := make([]v1.ContainerStatus, 0, len(specs))
	for i := range specs {
		c := &specs[i]
		s := v1.ContainerStatus{Name: c.Name, Image: c.Image, VolumeMounts: volumeMountStatuses(c, in.SupportsRRO)}
		latest := rs.Latest(c.Name)
		var old *v1.ContainerStatus
		for j := range prev {
			if prev[j].Name == c.Name {
				old = &prev[j]
			}
		}
		if latest != nil {
			s.ContainerID = prefix + latest.ID
			s.ImageID = latest.ImageRef
			s.RestartCount = int32(latest.RestartCount)
			s.State = containerState(latest, c, prefix)
			s.User = latest.User
			s.StopSignal = latest.StopSignal
			// As upstream (InPlacePodVerticalScaling, GA): what the
			// runtime applied, and what the spec allocates.
			s.Resources = statusResources(c, latest, old, s.ContainerID)
			s.AllocatedResources = c.Resources.Requests
			if p := rs.Previous(c.Name); p != nil && p.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				s.LastTerminationState = containerState(p, c, prefix)
			}
		} else {
			s.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: kubecontainer.DefaultWaitingReason(in.Pod)}}
		}
		carryOver(&s, old, latest != nil, sync.RestartedAll)
		if w, ok := sync.Waiting[c.Name]; ok && (latest == nil || latest.State != runtimeapi.ContainerState_CONTAINER_RUNNING) {
			// A container nodelet could not (re)start is waiting; its last
			// run, if any, is its last state.
			if s.State.Terminated != nil {
				s.LastTerminationState = s.State
			}
			s.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
		}
		// Never go backwards: a terminated container is not reported running.
		if old != nil && old.State.Terminated != nil && s.State.Running != nil && old.ContainerID == s.ContainerID {
			s.State = old.State
		}
		running := s.State.Running != nil
		started, ready := running, running
		if running && in.Probes != nil && latest != nil {
			started = in.Probes.Started(latest.ID)
			ready = in.Probes.Ready(latest.ID, c.ReadinessProbe != nil)
		}
		if init && !podspec.IsSidecar(c) {
			// An init container that completed is ready, as upstream's
			// prober manager reports it; one still running is not.
			ready = s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
		}
		s.Started = &started
		s.Ready = ready
		out = append(out, s)
	}
	return out
}

// volumeMountStatuses are the container's volume mounts as its status
// reports them (RecursiveReadOnlyMounts): a read-only one says whether it
// is recursively read-only, as upstream's convertToAPIContainerStatuses.
// statusResources is a container's status.resources, upstream's
// convertContainerStatusResources: the spec's (allocated) requests and
// limits, with the values the runtime reports for a running container (CPU
// request and limit, memory limit) in their place; a value the runtime does
// not report keeps the one the container's last status had. A CPU request
// or limit too small to matter (at most MinShares, MinMilliCPULimit) keeps
// the spec's when the spec's is as small.
func statusResources(spec *v1.Container, cs *kubecontainer.ContainerStatus, old *v1.ContainerStatus, containerID string) *v1.ResourceRequirements {
	res := spec.Resources.DeepCopy()
	if cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return res
	}
	sameRun := old != nil && old.State.Running != nil && old.ContainerID == containerID && old.Resources != nil
	keep := func(name v1.ResourceName, from func(*v1.ResourceRequirements) v1.ResourceList, into v1.ResourceList) {
		if !sameRun {
			return
		}
		if q, ok := from(old.Resources)[name]; ok {
			into[name] = q.DeepCopy()
		}
	}
	limits := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	actual := cs.Resources
	if actual == nil {
		actual = &kubecontainer.ContainerResources{}
	}
	if res.Limits != nil {
		switch {
		case actual.CPULimit != nil:
			if actual.CPULimit.MilliValue() > cgroups.MinMilliCPULimit || res.Limits.Cpu().MilliValue() > cgroups.MinMilliCPULimit {
				res.Limits[v1.ResourceCPU] = actual.CPULimit.DeepCopy()
			}
		default:
			keep(v1.ResourceCPU, limits, res.Limits)
		}
		if actual.MemoryLimit != nil {
			res.Limits[v1.ResourceMemory] = actual.MemoryLimit.DeepCopy()
		} else {
			keep(v1.ResourceMemory, limits, res.Limits)
		}
	}
	if res.Requests != nil {
		switch {
		case actual.CPURequest != nil:
			if actual.CPURequest.MilliValue() > cgroups.MinShares || res.Requests.Cpu().MilliValue() > cgroups.MinShares {
				res.Requests[v1.ResourceCPU] = actual.CPURequest.DeepCopy()
			}
		default:
			keep(v1.ResourceCPU, requests, res.Requests)
		}
		if actual.MemoryRequest != nil {
			res.Requests[v1.ResourceMemory] = actual.MemoryRequest.DeepCopy()
		} else {
			keep(v1.ResourceMemory, requests, res.Requests)
		}
	}
	return res
}

// ReasonRestartingAllContainers is the reason of a container removed by a
// RestartAllContainers reset, as upstream.
const ReasonRestartingAllContainers = "RestartingAllContainers"

const msgRestartingAllContainers = "The container is removed because RestartAllContainers in place"

// carryOver keeps what the runtime no longer tells about a container once
// its earlier instances are gone (a RestartAllContainers reset removes
// them): as upstream, the restart count never goes down and the last
// termination stays known. restartedAll: this sync removed them; a
// container that ran is then waiting, its last state "killed by the
// reset" (exit code 137), its restart count one more.
func carryOver(s *v1.ContainerStatus, old *v1.ContainerStatus, inRuntime, restartedAll bool) {
	if old == nil {
		return
	}
	if !inRuntime {
		if restartedAll && old.ContainerID != "" && old.State.Waiting == nil {
			s.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonRestartingAllContainers, Message: msgRestartingAllContainers}}
			s.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
				Reason: ReasonRestartingAllContainers, Message: msgRestartingAllContainers, ExitCode: 137}}
			s.RestartCount = old.RestartCount + 1
			return
		}
		s.RestartCount = old.RestartCount
		if s.LastTerminationState.Terminated == nil {
			s.LastTerminationState = old.LastTerminationState
		}
		return
	}
	s.RestartCount = max(s.RestartCount, old.RestartCount)
	if s.LastTerminationState.Terminated == nil {
		switch {
		case old.ContainerID != s.ContainerID && old.State.Terminated != nil:
			s.LastTerminationState = v1.ContainerState{Terminated: old.State.Terminated}
		case old.LastTerminationState.Terminated != nil:
			s.LastTerminationState = v1.ContainerState{Terminated: old.LastTerminationState.Terminated}
		}
	}
}

func volumeMountStatuses(c *v1.Container, supportsRRO bool) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		st := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if rro, err := podspec.ResolveRecursiveReadOnly(vm, supportsRRO); err == nil && rro {
				mode = v1.RecursiveReadOnlyEnabled
			}
			st.RecursiveReadOnly = &mode
		}
		out = append(out, st)
	}
	return out
}

func containerState(cs *kubecontainer.ContainerStatus, spec *v1.Container, prefix string) v1.ContainerState {
	switch cs.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: apiTime(cs.StartedAt)}}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		reason := cs.Reason
		if reason == "" {
			reason = "Error"
			if cs.ExitCode == 0 {
				reason = "Completed"
			}
		}
		t := &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      reason,
			Message:     cs.Message,
			StartedAt:   apiTime(cs.StartedAt),
			FinishedAt:  apiTime(cs.FinishedAt),
			ContainerID: prefix + cs.ID,
		}
		return v1.ContainerState{Terminated: t}
	default:
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: kubecontainer.ReasonContainerCreating}}
	}
}

// phase computes the pod phase as upstream's getPhase with
// ContainerRestartRules: a failed init container that will not run again
// fails the pod; containers that all stopped leave it Running while one of
// them restarts, else Succeeded or Failed. initialized says an app
// container of the current sandbox exists (restarting sidecars then do not
// put the pod back to Pending); terminal, that none restarts again.
// restartable: the container runs again after t, by its restart policy
// and rules, or because a RestartAllContainers reset stopped it.
func restartable(c *v1.Container, spec *v1.PodSpec, t *v1.ContainerStateTerminated) bool {
	return t.Reason == ReasonRestartingAllContainers || podspec.ContainerShouldRestart(c, spec, t.ExitCode)
}

func phase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus, initFailed, initialized, terminal bool) v1.PodPhase {
	if initFailed {
		return v1.PodFailed
	}
	spec := &pod.Spec
	pendingInit, pendingSidecars, failedInitNotRestartable := 0, 0, 0
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	// terminated is the container's last exit, if it is not running again.
	terminated := func(s *v1.ContainerStatus) *v1.ContainerStateTerminated {
		if s.State.Terminated != nil {
			return s.State.Terminated
		}
		if s.State.Waiting != nil {
			return s.LastTerminationState.Terminated
		}
		return nil
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		s, ok := findStatus(initStatuses, c.Name)
		if podspec.IsSidecar(c) {
			switch {
			case !ok:
				unknown++
			case s.State.Running != nil:
				if s.Started == nil || !*s.Started {
					pendingSidecars++
				}
				running++
			case terminated(&s) != nil:
				// Stopped sidecars do not count for the phase.
			case s.State.Waiting != nil:
				pendingSidecars++
				waiting++
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch t := terminated(&s); {
		case !ok || s.State.Running != nil:
			pendingInit++
		case t != nil && t.ExitCode != 0:
			if !restartable(c, spec, t) {
				failedInitNotRestartable++
			}
		case t == nil:
			pendingInit++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		s, ok := findStatus(statuses, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch t := terminated(&s); {
		case s.State.Running != nil:
			running++
		case t != nil:
			stopped++
			if !restartable(c, spec, t) {
				stoppedNotRestartable++
			}
			if s.State.Terminated != nil && t.ExitCode == 0 {
				succeeded++
			}
		case s.State.Waiting != nil:
			waiting++
		default:
			unknown++
		}
	}
	if failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !initialized), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if stopped != stoppedNotRestartable && !terminal {
			return v1.PodRunning // one of them restarts
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}

// apiTime is t as the API stores it: whole seconds. Statuses compare equal
// to what the API server returns, so an unchanged pod is never patched.
func apiTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t.Truncate(time.Second))
}
