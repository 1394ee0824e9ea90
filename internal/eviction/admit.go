package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/podspec"
)

// ReasonEvicted is the reason of a pod evicted by the node, or rejected
// because of the node's pressure, as upstream.
const ReasonEvicted = "Evicted"

// systemCriticalPriority is the priority from which a pod is critical
// (system-cluster-critical and system-node-critical are above it).
const systemCriticalPriority = podspec.SystemCriticalPriority

// IsCritical reports whether the pod is critical to the node: a static or
// mirror pod, or one with a system-critical priority (podspec.IsCritical).
// Critical pods are admitted under pressure and never evicted.
func IsCritical(pod *v1.Pod) bool { return podspec.IsCritical(pod) }

// Admit decides whether a new pod may start under the node's pressure
// conditions, as upstream: without pressure, or a critical pod, always;
// under memory pressure alone, a pod that is not BestEffort, or a
// BestEffort one that tolerates the memory-pressure taint; otherwise not,
// with reason Evicted and the conditions in the message. (Lt and Gt
// tolerations match no taint: upstream's TaintTolerationComparisonOperators
// is off by default.)
func Admit(logger klog.Logger, conditions []v1.NodeConditionType, pod *v1.Pod) admission.Result {
	if len(conditions) == 0 || IsCritical(pod) {
		return admission.Result{Admit: true}
	}
	if len(conditions) == 1 && conditions[0] == v1.NodeMemoryPressure {
		if podspec.QOSClass(pod) != v1.PodQOSBestEffort {
			return admission.Result{Admit: true}
		}
		taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		for i := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[i].ToleratesTaint(logger, taint, false) {
				return admission.Result{Admit: true}
			}
		}
	}
	return admission.Result{Admit: false, Reason: ReasonEvicted, Message: fmt.Sprintf("The node had condition: %v. ", conditions)}
}
