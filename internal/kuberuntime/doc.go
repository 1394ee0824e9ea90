// Package kuberuntime owns a pod's life in the container runtime, through
// the CRI: it reads what the runtime has for a pod (GetPodStatus, GetPods),
// decides what to change so the runtime matches the pod spec
// (computePodActions: sandbox, init containers in order, app containers,
// restart policy, CrashLoopBackOff) and does it (SyncPod), and stops pods
// gracefully (KillPod).
//
// Everything it creates carries the io.kubernetes.* labels and annotations
// the upstream kubelet writes, so crictl and other tools understand it and a
// restarted nodelet adopts what it finds. The Manager keeps no per-pod state
// of its own except the restart back-off and what spares runtime reads: the
// statuses of containers and sandboxes (valid while the runtime lists them
// in the same state), which pods the last relist found or a sandbox is
// being created for (a pod in neither has nothing in the runtime), and the
// last relist's lists, which answer a status needed only as of a time
// before that relist began (GetPodStatusNewerThan). Callers serialize calls
// per pod (the pod workers do).
package kuberuntime
