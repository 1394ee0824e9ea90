package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// The pods and the node the benchmarks run, as test/e2e's tests make them
// (standalone_test.go and cluster_test.go there).

const busybox = "docker.io/library/busybox:1.36"

func podManifest(name, extraSpec string, containers ...string) string {
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

func container(name, script string) string {
	return fmt.Sprintf(`  - name: %s
    image: %s
    command: ["sh", "-c", %q]
`, name, busybox, script)
}

// clusterNode starts a nodelet that joins the control plane as node name.
func clusterNode(t testing.TB, name string) (*framework.Cluster, *framework.Nodelet) {
	t.Helper()
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)
	return c, n
}

func busyboxPod(name, node, script string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []v1.Container{{
				Name: "c", Image: busybox, Command: []string{"sh", "-c", script},
			}},
		},
	}
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
