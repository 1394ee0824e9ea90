package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestImageVolumes: image volumes (GA in 1.36) on the stack's containerd 2,
// as upstream's ImageVolume tests: the image is pulled with the volume's
// pull policy and mounted read-only by the runtime, whole or a subPath of
// it; a container mounting an image that cannot be pulled waits in
// ImagePullBackOff while one that does not mount it runs; a subPath the
// image lacks is the runtime's CreateContainerError.
func TestImageVolumes(t *testing.T) {
	const node = "imagevolume-node"
	c, _ := clusterNode(t, node, "")
	if c.Env["STACK_RUNTIME"] != "containerd2" {
		if framework.InCI() {
			t.Fatalf("the stack's runtime is %q; image volumes need containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
		}
		t.Skipf("the stack's runtime is %q; image volumes need containerd 2 (STACK_RUNTIME=containerd2, the default)", c.Env["STACK_RUNTIME"])
	}
	ns := c.Namespace(t, "imagevolume")
	ctx := context.Background()
	missing := c.Env["REGISTRY"] + "/nodelet/no-such-image:1"
	image := func(ref string, policy v1.PullPolicy) v1.Volume {
		return v1.Volume{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}
	}
	pods := map[string]struct {
		script string
		volume v1.Volume
		mount  *v1.VolumeMount
	}{
		"whole": {`test -x /img/bin/busybox && echo HAS; touch /img/x 2>/dev/null || echo READONLY; grep ' /img ' /proc/mounts; echo END; sleep 3600`,
			image(framework.Busybox, v1.PullAlways), &v1.VolumeMount{Name: "img", MountPath: "/img"}},
		"sub": {`test -x /sbin2/busybox && echo HAS; test -e /sbin2/bin || echo ONLY-SUBPATH; echo END; sleep 3600`,
			image(framework.Busybox, v1.PullIfNotPresent), &v1.VolumeMount{Name: "img", MountPath: "/sbin2", SubPath: "bin"}},
		"missing": {"sleep 3600", image(missing, v1.PullIfNotPresent), &v1.VolumeMount{Name: "img", MountPath: "/img"}},
		"unused":  {"echo END; sleep 3600", image(missing, v1.PullIfNotPresent), nil},
		"badsub": {"sleep 3600", image(framework.Busybox, v1.PullIfNotPresent),
			&v1.VolumeMount{Name: "img", MountPath: "/img", SubPath: "not-existing"}},
	}
	for name, p := range pods {
		pod := busyboxPod(name, node, p.script)
		pod.Spec.Volumes = []v1.Volume{p.volume}
		if p.mount != nil {
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{*p.mount}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"whole", "sub", "unused"} {
		waitPod(t, c, ns, name, 90*time.Second, "Ready", podReady)
	}
	out := podOutput(t, c, ns, "whole", "c")
	mustContain(t, "whole image", out, "HAS\n", "READONLY\n")
	if !strings.Contains(out, " ro,") && !strings.Contains(out, " ro ") {
		t.Errorf("the image is not mounted read-only: %s", out)
	}
	mustContain(t, "subPath bin", podOutput(t, c, ns, "sub", "c"), "HAS\n", "ONLY-SUBPATH\n")
	waitPod(t, c, ns, "missing", 90*time.Second, "ImagePullBackOff", func(p *v1.Pod) bool {
		return waitingReason(p, "ImagePullBackOff", `Back-off pulling image "`+missing+`"`)
	})
	waitPod(t, c, ns, "badsub", 90*time.Second, "CreateContainerError", func(p *v1.Pod) bool {
		return waitingReason(p, "CreateContainerError", "not-existing")
	})
	// As upstream, the container's status echoes the spec's mount (not
	// readOnly, though the image is mounted read-only).
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "whole", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, vm := range p.Status.ContainerStatuses[0].VolumeMounts {
		found = found || (vm.Name == "img" && vm.MountPath == "/img" && !vm.ReadOnly)
	}
	if !found {
		t.Errorf("status volumeMounts %+v, want img at /img", p.Status.ContainerStatuses[0].VolumeMounts)
	}
}
