// Package topologymanager owns the topology manager (upstream's
// pkg/kubelet/cm/topologymanager): the NUMA affinity of a pod's
// resources. Its hint providers (the CPU manager, the device manager, the
// memory manager) say on which NUMA nodes they could satisfy a container
// (or a pod, under the pod scope); the policy merges their hints into one
// (none, best-effort, restricted, single-numa-node, with upstream's
// options prefer-closest-numa-nodes and max-allowable-numa-nodes), refuses
// the pod with TopologyAffinityError when it cannot be aligned, and the
// providers then allocate with that affinity. It is the admission handler
// of resource allocation: under the none policy it only has the providers
// allocate, container by container, as upstream.
package topologymanager
