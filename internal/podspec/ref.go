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
