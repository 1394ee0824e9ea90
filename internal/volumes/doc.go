// Package volumes owns the host side of a pod's volumes: it prepares each
// volume of a pod under <root-dir>/pods/<uid>/volumes before its containers
// start and reports where each one is on the host, and it removes them when
// the pod is gone (never touching a hostPath's contents), from the
// directories alone if need be (pods deleted while nodelet was down).
//
// Each kind of volume source is provided by a Plugin registered for it:
// emptyDir (disk, or a tmpfs for medium Memory), hostPath, configMap,
// secret, downwardAPI (fieldRef and resourceFieldRef) and projected
// (configMap, secret, downwardAPI, serviceAccountToken). internal/csi
// registers for csi, persistentVolumeClaim and ephemeral. A kind without a
// plugin (nfs, iscsi, ...) is refused with a clear error, so a pod never
// runs silently without its data.
//
// The pod's fsGroup is applied as upstream's SetVolumeOwnership (not to
// hostPath). A disk emptyDir's sizeLimit is the eviction manager's (from
// the stats summary), as upstream.
package volumes
