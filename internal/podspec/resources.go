package podspec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// QOSClass computes the pod's QoS class as upstream: Guaranteed when every
// container has cpu and memory limits and requests equal to them,
// BestEffort when none has any request or limit, Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	guaranteed, any := true, false
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[name]
				lim, hasLim := c.Resources.Limits[name]
				if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
					any = true
				}
				if !hasLim || lim.IsZero() || (hasReq && req.Cmp(lim) != 0) {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}

// AddResource adds q to l[name].
func AddResource(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; ok {
		cur.Add(q)
		l[name] = cur
		return
	}
	l[name] = q.DeepCopy()
}
