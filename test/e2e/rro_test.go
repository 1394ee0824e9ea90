package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestRecursiveReadOnlyAndSupplementalGroupsPolicy, on the stack's
// containerd 2 (which says it can do both):
//   - recursiveReadOnly: a read-only hostPath mount of a directory with a
//     tmpfs mounted below it: Enabled and IfPossible make the submount
//     read-only too, Disabled leaves it writable (the plain read-only bind
//     only covers the top); the containers' status.volumeMounts say which;
//   - supplementalGroupsPolicy Strict is admitted (node.status.features
//     says the runtime honours it) and the container status reports the
//     process's user (uid, gid, supplementary groups) as the runtime does.
func TestRecursiveReadOnlyAndSupplementalGroupsPolicy(t *testing.T) {
	const node = "rro-node"
	c, _ := clusterNode(t, node, "")
	if c.Env["STACK_RUNTIME"] != "containerd2" {
		if framework.InCI() {
			t.Fatalf("the stack's runtime is %q; this needs containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
		}
		t.Skipf("the stack's runtime is %q; this needs containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
	}
	ns := c.Namespace(t, "rro")
	ctx := context.Background()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })

	const try = `if touch /h/sub/f 2>/dev/null; then echo SUB-WRITABLE; else echo SUB-READONLY; fi; echo END; sleep 3600`
	for name, mode := range map[string]v1.RecursiveReadOnlyMode{"enabled": v1.RecursiveReadOnlyEnabled, "ifpossible": v1.RecursiveReadOnlyIfPossible, "disabled": v1.RecursiveReadOnlyDisabled} {
		p := busyboxPod(name, node, try)
		p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/h", ReadOnly: true, RecursiveReadOnly: ptr.To(mode)}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]struct {
		out  string
		mode v1.RecursiveReadOnlyMode
	}{"enabled": {"SUB-READONLY", v1.RecursiveReadOnlyEnabled}, "ifpossible": {"SUB-READONLY", v1.RecursiveReadOnlyEnabled}, "disabled": {"SUB-WRITABLE", v1.RecursiveReadOnlyDisabled}} {
		waitPod(t, c, ns, name, 60*time.Second, "Ready", podReady)
		mustContain(t, name, podOutput(t, c, ns, name, "c"), want.out)
		vms := c.Pod(t, ns, name).Status.ContainerStatuses[0].VolumeMounts
		if len(vms) == 0 || vms[0].Name != "h" || vms[0].MountPath != "/h" || !vms[0].ReadOnly || ptr.Deref(vms[0].RecursiveReadOnly, "") != want.mode {
			t.Errorf("%s: status volumeMounts %+v, want h at /h read-only, recursiveReadOnly %s", name, vms, want.mode)
		}
	}

	nodeObj, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := nodeObj.Status.Features; f == nil || !ptr.Deref(f.SupplementalGroupsPolicy, false) {
		t.Fatalf("node status.features %+v: supplementalGroupsPolicy not reported", f)
	}
	strict := busyboxPod("strict", node, `id -G; echo END; sleep 3600`)
	strict.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000),
		SupplementalGroups: []int64{4000}, SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, strict, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "strict", 60*time.Second, "Ready", podReady)
	mustContain(t, "strict", podOutput(t, c, ns, "strict", "c"), "3000 4000")
	u := c.Pod(t, ns, "strict").Status.ContainerStatuses[0].User
	if u == nil || u.Linux == nil || u.Linux.UID != 1000 || u.Linux.GID != 3000 || !slices.Equal(u.Linux.SupplementalGroups, []int64{3000, 4000}) {
		t.Errorf("strict: status user %+v, want uid 1000 gid 3000 groups [3000 4000]", u)
	}
}
