// Package memorymanager owns the memory manager (upstream's
// pkg/kubelet/cm/memorymanager): under memoryManagerPolicy Static, the
// memory and huge pages of Guaranteed pods' containers pinned to NUMA
// nodes at admission (the container's cpuset.mems), the machine's memory
// accounted per NUMA node and type against reservedMemory, the record in
// <root-dir>/memory_manager_state (its state subpackage: upstream's
// format), the blocks the pod-resources API reports, and upstream's
// memory_manager_* metrics. The None policy pins nothing.
//
// Without a topology manager policy (none), a container's NUMA nodes are
// upstream's default hint: the fewest nodes that can hold its request.
package memorymanager
