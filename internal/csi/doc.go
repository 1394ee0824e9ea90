// Package csi owns the node side of the Container Storage Interface, as
// the upstream kubelet's pkg/volume/csi: which CSI drivers are registered
// on the node (through internal/pluginwatcher: the versions they offer, their
// endpoint, NodeGetInfo) and what the cluster learns of them: the CSINode
// object's drivers (node ID, topology keys, allocatable count), the Node's
// csi.volume.kubernetes.io/nodeid annotation and topology labels.
//
// VolumePlugin is the volume plugin (internal/volumes' seam) of inline csi
// volumes and of PVCs and generic ephemeral volumes bound to CSI
// PersistentVolumes: the CSIDriver object decides attachment (the
// VolumeAttachment must be attached), pod info, tokens, the fsGroup policy
// and the lifecycle modes; volumes are staged once (STAGE_UNSTAGE_VOLUME)
// at <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount
// and published at <root>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount,
// with upstream's vol_data.json beside each, so teardown (unpublish, then
// unstage when no other pod uses the volume) works from the directories
// alone, after a restart too. Each CSI call has a timeout; a hung or failing
// driver holds only its pod.
package csi
