package podspec

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ContainerRef is the object reference events about a container point at, as
// upstream: the pod, with the container's field path.
func ContainerRef(pod *v1.Pod, c *v1.Container) *v1.ObjectReference {
	ref := &v1.ObjectReference{
		Kind:       "Pod",
		APIVersion: "v1",
		Name:       pod.Name,
		Namespace:  pod.Namespace,
		UID:        pod.UID,
	}
	if c == nil {
		return ref
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", c.Name)
			return ref
		}
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", c.Name)
	return ref
}

// IsSidecar reports whether c is a restartable init container (a sidecar):
// an init container with restartPolicy Always.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// GateStatuses are the statuses of the pod's readiness gate conditions, in
// gate order ("" for a condition the pod does not have).
func GateStatuses(pod *v1.Pod) []v1.ConditionStatus {
	out := make([]v1.ConditionStatus, len(pod.Spec.ReadinessGates))
	for i, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				out[i] = c.Status
			}
		}
	}
	return out
}

// GatesChanged reports whether a readiness gate's condition differs
// between two versions of a pod: the only status change nodelet reacts to.
func GatesChanged(a, b *v1.Pod) bool {
	x, y := GateStatuses(a), GateStatuses(b)
	if len(x) != len(y) {
		return true
	}
	for i := range x {
		if x[i] != y[i] {
			return true
		}
	}
	return false
}

// ReadOnlyVolume reports whether containers get the volume read-only
// whatever their volumeMount says: as upstream, the volumes whose files the
// node agent writes (configMap, secret, downwardAPI, projected), and image
// volumes (an image is never written to).
func ReadOnlyVolume(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil || v.Image != nil
}

// IsLocalEphemeralVolume reports whether the volume is the pod's local
// ephemeral storage on the node's filesystem, as upstream: gitRepo, an
// emptyDir on disk, configMap.
func IsLocalEphemeralVolume(v *v1.Volume) bool {
	return v.GitRepo != nil ||
		(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) ||
		v.ConfigMap != nil
}

// ResolveRecursiveReadOnly is upstream's resolveRecursiveReadOnly: whether
// a volume mount is made recursively read-only (recursiveReadOnly Enabled,
// or IfPossible where the runtime can), refusing Enabled where the runtime
// cannot and a recursive read-only mount that is not read-only or
// propagates.
func ResolveRecursiveReadOnly(vm v1.VolumeMount, runtimeSupportsRRO bool) (bool, error) {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !vm.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q",
			vm.Name, *vm.MountPropagation)
	}
	switch mode := *vm.RecursiveReadOnly; mode {
	case v1.RecursiveReadOnlyIfPossible:
		return runtimeSupportsRRO, nil
	case v1.RecursiveReadOnlyEnabled:
		if !runtimeSupportsRRO {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown recursive read-only mode %q", mode)
	}
}

// ContainerNames are the names of each pod's init and app containers, by
// pod UID (the containers the resource managers may hold resources for).
func ContainerNames(pods []*v1.Pod) map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(pods))
	for _, p := range pods {
		names := map[string]bool{}
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				names[cs[i].Name] = true
			}
		}
		out[string(p.UID)] = names
	}
	return out
}
