package podspec

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QOSClass computes the pod's QoS class as upstream v1.37 does: from the
// pod-level resources when they set cpu or memory (PodLevelResources, beta
// and on, with PodLevelResourcesFixKubeletQOSClass), else from every
// container's: Guaranteed when cpu and memory limits are set and requests
// equal them, BestEffort when there is no request or limit, Burstable
// otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class v1.PodQOSClass
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			switch c := requirementsQOS(&cs[i].Resources); {
			case c == v1.PodQOSBurstable:
				return c
			case class == "":
				class = c
			case class != c:
				return v1.PodQOSBurstable
			}
		}
	}
	if class == "" {
		return v1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is one set of requirements' class, as upstream's: per
// cpu and memory, BestEffort when request and limit are both zero,
// Guaranteed when they are equal and not zero, Burstable otherwise; the
// same for both, else Burstable.
func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var qos v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		lim := r.Limits[name]
		req, ok := r.Requests[name]
		if !ok {
			// What the API's defaulting gives (and so upstream sees): a
			// request missing beside a limit is the limit (static pods
			// may not have been through it).
			req = lim
		}
		c := v1.PodQOSGuaranteed
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			c = v1.PodQOSBestEffort
		}
		if qos == "" {
			qos = c
		} else if qos != c {
			return v1.PodQOSBurstable
		}
	}
	return qos
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
