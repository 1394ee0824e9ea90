package allocation

import (
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/internal/metrics"
)

// recordResizeOperations counts the container resources old and pod
// differ in (kubelet_container_requested_resizes_total) and reports
// whether anything of a resize changed, pod-level resources included, as
// upstream's recordResizeOperations.
func recordResizeOperations(old, pod *v1.Pod) bool {
	resized := !apiequality.Semantic.DeepEqual(old.Spec.Resources, pod.Spec.Resources)
	for _, kind := range []struct{ old, now []v1.Container }{
		{old.Spec.InitContainers, pod.Spec.InitContainers}, {old.Spec.Containers, pod.Spec.Containers},
	} {
		for i := range kind.old {
			o := &kind.old[i]
			var n *v1.Container
			for j := range kind.now {
				if kind.now[j].Name == o.Name {
					n = &kind.now[j]
				}
			}
			if n == nil {
				continue
			}
			for _, r := range []struct {
				resource, requirement string
				now, was              *resource.Quantity
			}{
				{"memory", "requests", n.Resources.Requests.Memory(), o.Resources.Requests.Memory()},
				{"memory", "limits", n.Resources.Limits.Memory(), o.Resources.Limits.Memory()},
				{"cpu", "requests", n.Resources.Requests.Cpu(), o.Resources.Requests.Cpu()},
				{"cpu", "limits", n.Resources.Limits.Cpu(), o.Resources.Limits.Cpu()},
			} {
				if op := resizeOperation(r.now, r.was); op != "" {
					resized = true
					metrics.ContainerRequestedResizes.WithLabelValues(r.resource, r.requirement, op).Inc()
				}
			}
		}
	}
	return resized
}

// resizeOperation is upstream's resizeOperationForResources.
func resizeOperation(now, was *resource.Quantity) string {
	switch {
	case now.IsZero() && !was.IsZero():
		return "remove"
	case was.IsZero() && !now.IsZero():
		return "add"
	case now.Cmp(*was) < 0:
		return "decrease"
	case now.Cmp(*was) > 0:
		return "increase"
	}
	return ""
}
