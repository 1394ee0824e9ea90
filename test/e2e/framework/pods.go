package framework

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The pods and the node the end-to-end tests and the benchmarks run
// (test/e2e and bench/e2e).

// Busybox is the image of the tests' pods, served by the stack's registry.
const Busybox = "docker.io/library/busybox:1.36"

// PodManifest is a static pod's manifest named name (its app label too),
// extraSpec's lines put into its spec before containers.
func PodManifest(name, extraSpec string, containers ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels:
    app: %s
spec:
%s  containers:
%s`, name, name, extraSpec, strings.Join(containers, ""))
}

// ManifestContainer is a busybox container for PodManifest running script.
func ManifestContainer(name, script string) string {
	return fmt.Sprintf(`  - name: %s
    image: %s
    command: ["sh", "-c", %q]
`, name, Busybox, script)
}

// BusyboxPod is a pod bound to node whose one container "c" runs script,
// with a grace period of 10 s.
func BusyboxPod(name, node, script string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []v1.Container{{
				Name: "c", Image: Busybox, Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// PodReady reports whether p's Ready condition is true.
func PodReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// ClusterNode starts a nodelet that joins the control plane as node name,
// extraConfig (if any) appended to its KubeletConfiguration, and waits until
// the node is Ready.
func ClusterNode(t testing.TB, name string, extraConfig string) (*Cluster, *Nodelet) {
	t.Helper()
	c := RequireCluster(t)
	n := NewClusterNodelet(t, c, name)
	if extraConfig != "" {
		n.AppendConfig(extraConfig)
	}
	n.Start()
	Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)
	return c, n
}
