package podspec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceFieldValue is a resourceFieldRef's value (env and downwardAPI
// volumes), as upstream: the container's request or limit divided by the
// divisor (1 when unset) and rounded up. A limit the container does not set (or sets to 0)
// is the pod-level limit when the pod has one (cpu, memory), else the node's
// allocatable.
func ResourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	c := containerNamed(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %q not found in the pod", ref.ContainerName)
	}
	limits := v1.ResourceList{}
	for name, q := range c.Resources.Limits {
		limits[name] = q
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; ok && !q.IsZero() {
			continue
		}
		if pod.Spec.Resources != nil && name != v1.ResourceEphemeralStorage {
			if q, ok := pod.Spec.Resources.Limits[name]; ok && !q.IsZero() {
				limits[name] = q
				continue
			}
		}
		if q, ok := allocatable[name]; ok {
			limits[name] = q
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var list v1.ResourceList
	var name v1.ResourceName
	switch {
	case strings.HasPrefix(ref.Resource, "limits."):
		list, name = limits, v1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))
	case strings.HasPrefix(ref.Resource, "requests."):
		list, name = c.Resources.Requests, v1.ResourceName(strings.TrimPrefix(ref.Resource, "requests."))
	default:
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
	switch {
	case name == v1.ResourceCPU:
		q := list[name]
		if divisor.MilliValue() == 0 {
			return "", fmt.Errorf("divisor %s is too small for cpu", divisor.String())
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage, strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
		q := list[name]
		if divisor.Value() == 0 {
			return "", fmt.Errorf("divisor %s is too small for %s", divisor.String(), name)
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
}

func containerNamed(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
