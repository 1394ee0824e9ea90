package e2e

import (
	"testing"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// The pods and the node the benchmarks run, as test/e2e's tests make them.

const busybox = framework.Busybox

var (
	podManifest = framework.PodManifest
	container   = framework.ManifestContainer
	busyboxPod  = framework.BusyboxPod
	podReady    = framework.PodReady
)

// clusterNode starts a nodelet that joins the control plane as node name.
func clusterNode(t testing.TB, name string) (*framework.Cluster, *framework.Nodelet) {
	t.Helper()
	return framework.ClusterNode(t, name, "")
}
