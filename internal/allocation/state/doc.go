// Package state keeps resources recorded per pod and container (upstream's
// pkg/kubelet/allocation/state): what the node allocated to each pod
// (allocated_pods_state, owned by package allocation) and what the runtime
// was last told (actuated_pods_state, owned by kuberuntime). Each is a
// checkpoint file in the kubelet's root directory in upstream's format and
// checksum, so a node switched between the kubelet and nodelet keeps its
// pods' allocations.
package state
