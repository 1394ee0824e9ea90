// Package csi owns the node side of the Container Storage Interface, as
// the upstream kubelet's pkg/volume/csi: which CSI drivers are registered
// on the node (through internal/plugins: the versions they offer, their
// endpoint, NodeGetInfo) and what the cluster learns of them: the CSINode
// object's drivers (node ID, topology keys, allocatable count), the Node's
// csi.volume.kubernetes.io/nodeid annotation and topology labels.
//
// So far (issue 19): registration and node info. Staging, publishing,
// expansion and volume stats through the volume seam are still to come.
package csi
