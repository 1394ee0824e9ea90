package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/podspec"
)

// podActions is what SyncPod must do to make the runtime match the spec.
type podActions struct {
	// KillPod stops every container and the sandbox: the sandbox is gone or
	// changed, or nothing of the pod is left to run.
	KillPod bool
	// CreateSandbox starts a new sandbox (after KillPod) with Attempt.
	CreateSandbox bool
	SandboxID     string
	Attempt       uint32
	// NextInitContainer is the init container to start next, if any.
	NextInitContainer *v1.Container
	// InitFailed: an init container failed and the restart policy forbids
	// retrying it; the pod will not run.
	InitFailed bool
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// SidecarsToStart are indexes into pod.Spec.InitContainers of sidecars
	// (restartable init containers) to (re)start once initialization is
	// done; they start before the app containers.
	SidecarsToStart []int
	// SidecarStarted: NextInitContainer is a sidecar; the following init
	// container may start as soon as it is started.
	SidecarStarted bool
	// EphemeralToStart are indexes into pod.Spec.EphemeralContainers of
	// ephemeral containers that never ran (they are never restarted).
	EphemeralToStart []int
	// ContainersToKill maps container IDs to why they are killed.
	ContainersToKill map[string]killReason
	// RestartAll names the containers that exited with a
	// RestartAllContainers rule: every container is killed and removed
	// (RestartAllOrder) and the pod starts again from its first init
	// container in the same sandbox; nothing else is done in this sync.
	RestartAll []string
	// ContainersToUpdate are the running containers resized in place, by
	// resource, decreases first (resizeAction).
	ContainersToUpdate map[v1.ResourceName][]containerUpdate
	// UpdatePodResources: the pod cgroup is resized, for a container
	// restarted by its resize or started with other resources than
	// actuated.
	UpdatePodResources bool
}

type killReason struct {
	name    string
	message string
	// grace overrides the pod's grace period (a probe's own
	// terminationGracePeriodSeconds).
	grace *int64
}

// shouldRestart reports whether a container that is not running should be
// started (again): its restart rules and policy, else the pod's.
func shouldRestart(cs *kubecontainer.ContainerStatus, c *v1.Container, spec *v1.PodSpec) bool {
	if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		// Never ran, or created but never started, or unknown.
		return true
	}
	return podspec.ContainerShouldRestart(c, spec, cs.ExitCode)
}

// sandboxChanged reports whether the pod needs a new sandbox, the attempt
// number it gets, and the ID of the sandbox to keep otherwise.
func sandboxChanged(pod *v1.Pod, status *kubecontainer.PodStatus) (bool, uint32, string) {
	if len(status.Sandboxes) == 0 {
		return true, 0, ""
	}
	newest := status.Sandboxes[0]
	next := newest.GetMetadata().GetAttempt() + 1
	ready := 0
	for _, s := range status.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	if newest.State != runtimeapi.PodSandboxState_SANDBOX_READY || ready > 1 {
		return true, next, newest.Id
	}
	hostNet := newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNet != pod.Spec.HostNetwork {
		return true, next, newest.Id
	}
	if !pod.Spec.HostNetwork && len(status.IPs) == 0 {
		return true, next, newest.Id
	}
	return false, newest.GetMetadata().GetAttempt(), newest.Id
}

// ProbeResults tells SyncPod which running containers failed their
// liveness or startup probe.
type ProbeResults interface {
	// Unhealthy returns why the container must be restarted, or "", and
	// the failed probe's terminationGracePeriodSeconds if it has one.
	Unhealthy(containerID string) (string, *int64)
	// Started reports whether a running container's startup probe (if it
	// has one) has passed.
	Started(containerID string) bool
}

// computePodActions decides what SyncPod does. It is pure: the runtime's
// state, probe results and the resources actuated (nil: no in-place
// resize) in, the plan out. pod has its allocated resources.
func computePodActions(pod *v1.Pod, status *kubecontainer.PodStatus, probes ProbeResults, actuated *Actuated) podActions {
	create, attempt, sandboxID := sandboxChanged(pod, status)
	a := podActions{
		KillPod:          create,
		CreateSandbox:    create,
		Attempt:          attempt,
		SandboxID:        sandboxID,
		ContainersToKill: map[string]killReason{},
	}
	policy := pod.Spec.RestartPolicy
	if create {
		if policy == v1.RestartPolicyNever && attempt != 0 && len(status.Containers) != 0 {
			// The pod ran and may not run again.
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		created := false
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			cs := status.Latest(c.Name)
			created = created || cs != nil
			// A container that exited and may not run again (OnFailure and
			// succeeded, or its own policy Never) stays done in the new
			// sandbox too.
			if cs != nil && cs.State == runtimeapi.ContainerState_CONTAINER_EXITED &&
				!podspec.ContainerShouldRestart(c, &pod.Spec, cs.ExitCode) {
				continue
			}
			toStart = append(toStart, i)
		}
		// Nothing left to run once initialized (an app container was
		// created): no new sandbox, init containers or not, as upstream.
		if len(toStart) == 0 && (created || len(pod.Spec.InitContainers) == 0) {
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) > 0 {
			// A new sandbox runs the init containers again, from the first.
			a.NextInitContainer = &pod.Spec.InitContainers[0]
			a.SidecarStarted = podspec.IsSidecar(a.NextInitContainer)
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	// RestartAllContainersOnContainerExits (beta, on; nodelet refuses it
	// off): a container exited with a RestartAllContainers rule.
	if sources := kubecontainer.RestartAllSources(pod, status); len(sources) > 0 {
		a.RestartAll = sources
		return a
	}

	// Ephemeral containers start once, even during initialization.
	for i := range pod.Spec.EphemeralContainers {
		if status.Latest(pod.Spec.EphemeralContainers[i].Name) == nil {
			a.EphemeralToStart = append(a.EphemeralToStart, i)
		}
	}

	// The sandbox is fine. Init containers first, one at a time; a sidecar
	// only has to be started (its startup probe passed) for the next one.
	if len(pod.Spec.InitContainers) > 0 && !initDone(pod, status, sandboxID, probes) {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			cs := status.LatestIn(c.Name, sandboxID)
			if podspec.IsSidecar(c) {
				switch {
				case cs == nil || cs.State == runtimeapi.ContainerState_CONTAINER_EXITED:
					a.NextInitContainer = c
					a.SidecarStarted = true
				case cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
					if probes != nil {
						// A failed startup probe, or a failed liveness
						// probe once started, restarts it here too.
						if why, grace := probes.Unhealthy(cs.ID); why != "" {
							a.ContainersToKill[cs.ID] = killReason{c.Name, why, grace}
							a.NextInitContainer = c
							a.SidecarStarted = true
							return a
						}
					}
					if !resizeAction(pod, c, cs, actuated, &a) {
						// Restarted for its resize.
						a.NextInitContainer = c
						a.SidecarStarted = true
						return a
					}
					if sidecarStarted(cs, probes) {
						continue
					}
					// Wait for its startup probe.
				default:
					a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: "Init container is in an unknown state"}
					a.NextInitContainer = c
				}
				return a
			}
			switch {
			case cs == nil:
				a.NextInitContainer = c
			case cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
				// Wait for it; resized in place meanwhile (its resizePolicy
				// cannot ask for a restart).
				resizeAction(pod, c, cs, actuated, &a)
			case cs.State == runtimeapi.ContainerState_CONTAINER_EXITED && cs.ExitCode == 0:
				continue
			case cs.State == runtimeapi.ContainerState_CONTAINER_EXITED:
				if !podspec.ContainerShouldRestart(c, &pod.Spec, cs.ExitCode) {
					a.InitFailed = true
					a.KillPod = true
				} else {
					a.NextInitContainer = c
				}
			default:
				// Created but not started, or unknown: replace it.
				a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: "Init container is in an unknown state"}
				a.NextInitContainer = c
			}
			return a
		}
	}

	// Sidecars run as long as the app containers, whatever the pod's
	// restart policy: restarted when they exit or fail their liveness probe.
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !podspec.IsSidecar(c) {
			continue
		}
		cs := status.LatestIn(c.Name, sandboxID)
		switch {
		case cs == nil || cs.State == runtimeapi.ContainerState_CONTAINER_EXITED:
			a.SidecarsToStart = append(a.SidecarsToStart, i)
		case cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING:
			a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: "Container is in an unknown state"}
			a.SidecarsToStart = append(a.SidecarsToStart, i)
		default:
			if probes != nil {
				if why, grace := probes.Unhealthy(cs.ID); why != "" {
					a.ContainersToKill[cs.ID] = killReason{c.Name, why, grace}
					a.SidecarsToStart = append(a.SidecarsToStart, i)
					continue
				}
			}
			if !resizeAction(pod, c, cs, actuated, &a) {
				a.SidecarsToStart = append(a.SidecarsToStart, i)
			}
		}
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.Latest(c.Name)
		if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			if cs != nil && cs.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: "Container is in an unknown state"}
			}
			if shouldRestart(cs, c, &pod.Spec) {
				a.ContainersToStart = append(a.ContainersToStart, i)
			}
			continue
		}
		if probes != nil {
			if why, grace := probes.Unhealthy(cs.ID); why != "" {
				a.ContainersToKill[cs.ID] = killReason{c.Name, why, grace}
				if podspec.RestartsAfterKill(c, &pod.Spec) {
					a.ContainersToStart = append(a.ContainersToStart, i)
				}
				continue
			}
		}
		if podspec.ContainerChanged(cs.Hash, c) {
			// A changed definition restarts whatever the policy, as upstream.
			a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: fmt.Sprintf("Container %s definition changed", c.Name)}
			a.ContainersToStart = append(a.ContainersToStart, i)
			continue
		}
		if !resizeAction(pod, c, cs, actuated, &a) {
			a.ContainersToStart = append(a.ContainersToStart, i)
			continue
		}
		keep++
	}
	// Running containers the spec no longer has.
	inSpec := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		inSpec[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		inSpec[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		inSpec[c.Name] = true
	}
	for _, cs := range status.Containers {
		if cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING && !inSpec[cs.Name] {
			a.ContainersToKill[cs.ID] = killReason{name: cs.Name, message: "Container is not in the pod spec"}
		}
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		// No app container runs or will: stop the sandbox (and the
		// sidecars with it).
		a.KillPod = true
		a.SidecarsToStart = nil
	}
	if !a.UpdatePodResources {
		var starting []*v1.Container
		for _, i := range a.SidecarsToStart {
			starting = append(starting, &pod.Spec.InitContainers[i])
		}
		for _, i := range a.ContainersToStart {
			starting = append(starting, &pod.Spec.Containers[i])
		}
		a.UpdatePodResources = startingResized(pod, starting, actuated)
	}
	return a
}

// sidecarStarted reports whether a running sidecar counts as started: no
// startup probe, or it passed.
func sidecarStarted(cs *kubecontainer.ContainerStatus, probes ProbeResults) bool {
	if probes == nil {
		return true
	}
	return probes.Started(cs.ID)
}

// initDone reports whether initialization is over in the sandbox: every
// regular init container succeeded and every sidecar is started (assumed
// once app containers exist there).
func initDone(pod *v1.Pod, status *kubecontainer.PodStatus, sandboxID string, probes ProbeResults) bool {
	for _, c := range pod.Spec.Containers {
		if status.LatestIn(c.Name, sandboxID) != nil {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := status.LatestIn(c.Name, sandboxID)
		if podspec.IsSidecar(c) {
			if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING || !sidecarStarted(cs, probes) {
				return false
			}
			continue
		}
		if cs == nil || cs.State != runtimeapi.ContainerState_CONTAINER_EXITED || cs.ExitCode != 0 {
			return false
		}
	}
	return true
}

// RestartAllOrder is the order a RestartAllContainers reset stops and
// removes the pod's containers, as upstream: the app containers, then the
// init containers, each in reverse order, those that triggered it (sources)
// after all others.
func RestartAllOrder(pod *v1.Pod, sources []string) []string {
	isSource := map[string]bool{}
	for _, s := range sources {
		isSource[s] = true
	}
	reverse := func(cs []v1.Container, src bool) []string {
		var out []string
		for i := len(cs) - 1; i >= 0; i-- {
			if isSource[cs[i].Name] == src {
				out = append(out, cs[i].Name)
			}
		}
		return out
	}
	var order []string
	order = append(order, reverse(pod.Spec.Containers, false)...)
	order = append(order, reverse(pod.Spec.InitContainers, false)...)
	order = append(order, reverse(pod.Spec.Containers, true)...)
	order = append(order, reverse(pod.Spec.InitContainers, true)...)
	return order
}
