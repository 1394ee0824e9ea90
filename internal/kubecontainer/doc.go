// Package kubecontainer holds the types every part of the pod engine shares
// about what the container runtime has: PodStatus and ContainerStatus (one
// pod's sandboxes and containers as inspected) and RunningPod (a pod as the
// runtime lists it). It is a leaf: kuberuntime fills these types, pleg,
// podworkers, status and the per-pod sync read them without importing the
// runtime (upstream: pkg/kubelet/container). SyncResult, the waiting
// reasons and GracePeriod are here for the same reason: the runtime's sync
// produces them, status and podworkers read them.
package kubecontainer
