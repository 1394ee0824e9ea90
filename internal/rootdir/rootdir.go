// Package rootdir names what nodelet keeps under its root directory
// (--root-dir, /var/lib/kubelet by default), as upstream's
// kubelet_getters.go: every such path is made here, so the layout (which
// upstream's tools and drivers rely on: plugins_registry, device-plugins,
// pod-resources, pods/<uid>/volumes) is read in one place.
package rootdir

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// Dir is the root directory.
type Dir string

func (d Dir) join(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// Pods holds a directory per pod: <root>/pods.
func (d Dir) Pods() string { return d.join("pods") }

// Pod is a pod's directory: <root>/pods/<uid>.
func (d Dir) Pod(uid types.UID) string { return d.join("pods", string(uid)) }

// PodVolumes holds a pod's volumes, a folder per volume plugin:
// <root>/pods/<uid>/volumes.
func (d Dir) PodVolumes(uid types.UID) string { return d.join("pods", string(uid), "volumes") }

// PodEtcHosts is the /etc/hosts nodelet writes for a pod:
// <root>/pods/<uid>/etc-hosts.
func (d Dir) PodEtcHosts(uid types.UID) string { return d.join("pods", string(uid), "etc-hosts") }

// Plugins holds the volume plugins' node-wide state (CSI staging paths):
// <root>/plugins.
func (d Dir) Plugins() string { return d.join("plugins") }

// PluginsRegistry is where plugins (CSI and DRA drivers) put their
// registration sockets: <root>/plugins_registry.
func (d Dir) PluginsRegistry() string { return d.join("plugins_registry") }

// DevicePlugins is the device plugins' folder (the Registration service's
// kubelet.sock, the plugins' sockets, the assignments' checkpoint):
// <root>/device-plugins.
func (d Dir) DevicePlugins() string { return d.join("device-plugins") }

// PodResourcesSocket is the pod-resources API's socket:
// <root>/pod-resources/kubelet.sock.
func (d Dir) PodResourcesSocket() string { return d.join("pod-resources", "kubelet.sock") }

// Seccomp holds the localhost seccomp profiles: <root>/seccomp.
func (d Dir) Seccomp() string { return d.join("seccomp") }

// PKI is the default --cert-dir: <root>/pki.
func (d Dir) PKI() string { return d.join("pki") }

// ShutdownState is graceful node shutdown's state file, as upstream:
// <root>/graceful_node_shutdown_state.
func (d Dir) ShutdownState() string { return d.join("graceful_node_shutdown_state") }

// ImageGCState keeps the images' first-seen and last-used times:
// <root>/image-gc-state.json.
func (d Dir) ImageGCState() string { return d.join("image-gc-state.json") }

// Offline is the offline checkpoint's folder: <root>/offline.
func (d Dir) Offline() string { return d.join("offline") }

// LocalAPISocket is the local API's socket (nodelet's CLI):
// <root>/nodelet.sock.
func (d Dir) LocalAPISocket() string { return d.join("nodelet.sock") }
