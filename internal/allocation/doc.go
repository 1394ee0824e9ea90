// Package allocation owns what the node allocated to each admitted pod
// (upstream's pkg/kubelet/allocation): the resources a pod was admitted
// with, checkpointed in allocated_pods_state so that a restart neither
// loses nor repeats an in-place resize; the resizes the API asked for that
// do not fit yet (Deferred, retried when room appears) or never will
// (Infeasible); and the pods' PodResizePending and PodResizeInProgress
// conditions with their events and metrics. The pod workers sync the pod
// with the allocation (UpdatePodFromAllocation), never with the spec's
// resources directly: kuberuntime actuates the difference.
package allocation
