package rootdir

import "testing"

// The layout upstream's tools and drivers rely on.
func TestLayout(t *testing.T) {
	d := Dir("/var/lib/kubelet")
	for got, want := range map[string]string{
		d.Pods():               "/var/lib/kubelet/pods",
		d.Pod("u1"):            "/var/lib/kubelet/pods/u1",
		d.PodVolumes("u1"):     "/var/lib/kubelet/pods/u1/volumes",
		d.PodEtcHosts("u1"):    "/var/lib/kubelet/pods/u1/etc-hosts",
		d.Plugins():            "/var/lib/kubelet/plugins",
		d.PluginsRegistry():    "/var/lib/kubelet/plugins_registry",
		d.DevicePlugins():      "/var/lib/kubelet/device-plugins",
		d.PodResourcesSocket(): "/var/lib/kubelet/pod-resources/kubelet.sock",
		d.Seccomp():            "/var/lib/kubelet/seccomp",
		d.PKI():                "/var/lib/kubelet/pki",
		d.ShutdownState():      "/var/lib/kubelet/graceful_node_shutdown_state",
		d.ImageGCState():       "/var/lib/kubelet/image-gc-state.json",
		d.Offline():            "/var/lib/kubelet/offline",
		d.LocalAPISocket():     "/var/lib/kubelet/nodelet.sock",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
