// Package volumes owns the host side of a pod's volumes: it prepares each
// volume of a pod under <root-dir>/pods/<uid>/volumes before its containers
// start and reports where each one is on the host, and it removes them when
// the pod is gone (never touching a hostPath's contents).
//
// Supported for now: emptyDir on disk and hostPath. Any other volume type is
// refused with a clear error, so a pod never runs silently without its data.
package volumes
