package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestUserNamespaces: pods with hostUsers: false run in a user namespace of
// their own (the stack's containerd 2 and runc: idmapped mounts), as
// upstream's UserNamespacesSupport: root inside is an unprivileged ID
// range of 65536 outside, different for each pod, recorded in the pod's
// directory (<root-dir>/pods/<uid>/userns, upstream's format) and kept
// across a nodelet restart; an emptyDir is writable by the pod's root; the
// node reports which runtime handlers support user namespaces. On
// containerd 1.6 (which lists no handlers) such a pod fails its sandbox
// with upstream's message.
func TestUserNamespaces(t *testing.T) {
	const node = "userns-node"
	c, n := clusterNode(t, node, "")
	if c.Env["STACK_RUNTIME"] != "containerd2" {
		if framework.InCI() {
			t.Fatalf("the stack's runtime is %q; user namespaces need containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
		}
		t.Skipf("the stack's runtime is %q; user namespaces need containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
	}
	ns := c.Namespace(t, "userns")
	ctx := context.Background()
	const report = `cat /proc/self/uid_map /proc/self/gid_map; id -u; touch /data/f && echo WROTE; echo END; sleep 3600`
	for _, name := range []string{"a", "b", "host"} {
		p := busyboxPod(name, node, report)
		if name != "host" {
			p.Spec.HostUsers = ptr.To(false)
		}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hostIDs := map[string]string{}
	for _, name := range []string{"a", "b"} {
		waitPod(t, c, ns, name, 60*time.Second, "Ready", podReady)
		out := podOutput(t, c, ns, name, "c")
		lines := strings.Fields(strings.ReplaceAll(out, "\n", " "))
		// uid_map: "0 HOST 65536", gid_map the same, then id -u 0.
		if len(lines) < 7 || lines[0] != "0" || lines[2] != "65536" || lines[3] != "0" || lines[4] != lines[1] || lines[5] != "65536" || lines[6] != "0" {
			t.Fatalf("%s: uid/gid maps and id: %q", name, out)
		}
		if lines[1] == "0" {
			t.Errorf("%s: mapped to host ID 0: %q", name, out)
		}
		mustContain(t, name, out, "WROTE")
		hostIDs[name] = lines[1]
		p := c.Pod(t, ns, name)
		record, err := os.ReadFile(filepath.Join(n.RootDir, "pods", string(p.UID), "userns"))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"uidMappings":[{"hostId":` + lines[1] + `,"containerId":0,"length":65536}],"gidMappings":[{"hostId":` + lines[1] + `,"containerId":0,"length":65536}]}`; string(record) != want {
			t.Errorf("%s: userns record %s, want %s", name, record, want)
		}
	}
	if hostIDs["a"] == hostIDs["b"] {
		t.Errorf("both pods got host IDs from %s", hostIDs["a"])
	}
	waitPod(t, c, ns, "host", 60*time.Second, "Ready", podReady)
	mustContain(t, "host", podOutput(t, c, ns, "host", "c"), "0          0 4294967295")

	// The node says which handlers support user namespaces.
	nodeObj, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userns := false
	for _, h := range nodeObj.Status.RuntimeHandlers {
		if h.Name == "runc" && h.Features != nil && ptr.Deref(h.Features.UserNamespaces, false) {
			userns = true
		}
	}
	if !userns {
		t.Errorf("node status.runtimeHandlers %+v: runc does not say it supports user namespaces", nodeObj.Status.RuntimeHandlers)
	}

	// Restarted, nodelet keeps the pods' mappings (a new pod gets a third
	// range).
	n.Stop()
	n.Start()
	p := busyboxPod("c", node, report)
	p.Spec.HostUsers = ptr.To(false)
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "c", 60*time.Second, "Ready", podReady)
	third := strings.Fields(podOutput(t, c, ns, "c", "c"))[1]
	if third == hostIDs["a"] || third == hostIDs["b"] {
		t.Errorf("after a restart, a new pod got host IDs %s, already the range of a running pod (%v)", third, hostIDs)
	}
	for _, name := range []string{"a", "b"} {
		if p := c.Pod(t, ns, name); p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s restarted after nodelet's restart", name)
		}
	}
	// Upstream's counters, since the restart: one user namespaced pod.
	code, metrics := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	mustContain(t, "/metrics", metrics, "\nkubelet_started_user_namespaced_pods_total 1\n", "\nkubelet_started_user_namespaced_pods_errors_total 0\n")
}
