// Package dra owns the node's side of Dynamic Resource Allocation
// (resource.k8s.io/v1), upstream's pkg/kubelet/cm/dra: the DRA drivers'
// kubelet plugins registered through plugins_registry, and the claims
// prepared on this node for its pods, kept in <root-dir>/dra_manager_state
// in upstream's format (package state).
//
// Work in progress (issue 40): the checkpoint is in place; pods with
// spec.resourceClaims are still refused at admission (internal/podspec)
// until preparation, CDI devices and unpreparation work end to end.
package dra
