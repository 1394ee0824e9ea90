// Package cpumanager owns the node's CPU manager, upstream's
// pkg/kubelet/cm/cpumanager: the cpuManagerPolicy (none or static), the
// exclusive CPUs of Guaranteed containers with integer CPU requests, the
// shared pool every other container runs on, the CPUs reserved for the
// system (reservedSystemCPUs, or ceil(kubeReserved.cpu +
// systemReserved.cpu) taken by topology), and the checkpoint
// <root-dir>/cpu_manager_state in upstream's format, so a node switched
// between the upstream kubelet and nodelet keeps its assignments.
//
// The manager admits pods (its allocation is an admission handler, as
// upstream's through the topology manager), gives each container its
// cpuset when it is created, and, in its reconcile loop, writes the shared
// pool's current cpuset to the running containers that do not have it
// (CRI UpdateContainerResources). The CPUs of pods that are no longer
// active return to the shared pool. The policy's decisions are pure
// functions: topology discovery (sockets, NUMA nodes, cores, uncore
// caches), upstream's CPU assignment algorithms for every static policy
// option (assign.go: packed or spread across cores, distributed across
// NUMA nodes, aligned by socket or by uncore cache), validation of the
// options and of the checkpoint against the machine.
package cpumanager
