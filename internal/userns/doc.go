// Package userns owns the user namespaces of the pods with
// spec.hostUsers: false, as the kubelet's pkg/kubelet/userns does: the
// node's range of IDs the kubelet may hand out (the subordinate IDs of the
// user "kubelet" that getsubids reports, else every ID from idsPerPod up),
// cut into blocks of userNamespaces.idsPerPod IDs (65536 by default); a
// bitmap of the blocks in use; and each pod's block, recorded in
// <pods-dir>/<pod-uid>/userns (the same JSON file upstream writes) so that
// a restarted nodelet gives a pod the same mappings again.
//
// Manager.GetOrCreateUserNamespaceMappings gives the CRI the sandbox's user
// namespace: NODE for a pod that uses the host's (hostUsers unset or true),
// POD with the block's UID and GID mappings otherwise, refused when the
// runtime handler cannot do user namespaces. Release frees a terminated
// pod's block and CleanupOrphaned the blocks of pods the nodelet no longer
// knows. Refusing hostUsers: false with hostNetwork, hostPID or hostIPC is
// the API's validation, not this package's.
package userns
