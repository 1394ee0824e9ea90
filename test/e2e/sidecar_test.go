package e2e

import (
	"context"
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

// journal is a host directory the pod's containers append their steps to.
func journalPod(name, node, dir string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Volumes:                       []v1.Volume{{Name: "j", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}}},
		},
	}
}

// step is a container that appends "<name>-start" to the journal, then
// either exits or (long) runs until SIGTERM, appending "<name>-term".
func step(name string, long bool, sidecar bool) v1.Container {
	script := `echo ` + name + `-start >> /j/order`
	if long {
		script += `; trap 'echo ` + name + `-term >> /j/order; exit 0' TERM; while true; do sleep 0.1; done`
	}
	c := v1.Container{Name: name, Image: busybox, Command: []string{"sh", "-c", script},
		VolumeMounts: []v1.VolumeMount{{Name: "j", MountPath: "/j"}}}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	return c
}

func readJournal(t *testing.T, dir string) []string {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(dir, "order"))
	return strings.Fields(string(data))
}

// TestSidecarContainers: init containers and sidecars start in order, the
// next init container starting once the sidecar runs; sidecars keep running
// beside the app, are restarted when they exit without restarting the app,
// count for readiness, and are stopped after the app containers in reverse
// order; under restartPolicy Never the pod completes when its app does.
func TestSidecarContainers(t *testing.T) {
	const node = "sidecar-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "sidecar")
	ctx := context.Background()
	dir := t.TempDir()

	p := journalPod("web", node, dir)
	p.Spec.InitContainers = []v1.Container{step("i1", false, false), step("sc1", true, true), step("sc2", true, true), step("i2", false, false)}
	// i2 proves both sidecars run when it starts.
	p.Spec.InitContainers[3].Command = []string{"sh", "-c", `grep -q sc1-start /j/order && grep -q sc2-start /j/order && echo i2-start >> /j/order`}
	p.Spec.Containers = []v1.Container{step("app", true, false)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := waitPod(t, c, ns, "web", 60*time.Second, "Ready", podReady)
	t.Logf("pod with 2 init containers and 2 sidecars Ready after %v", time.Since(start).Round(time.Millisecond))
	if j := strings.Join(readJournal(t, dir), " "); j != "i1-start sc1-start sc2-start i2-start app-start" {
		t.Fatalf("start order: %s", j)
	}
	ics := got.Status.InitContainerStatuses
	if len(ics) != 4 || ics[1].State.Running == nil || !ics[1].Ready || ics[2].State.Running == nil ||
		ics[0].State.Terminated == nil || ics[3].State.Terminated == nil {
		t.Fatalf("init container statuses: %+v", ics)
	}

	// The sidecar's main process exits: it is restarted, the app is not.
	if out, err := c.KubectlOut(t, 30*time.Second, "-n", ns, "exec", "web", "-c", "sc1", "--", "kill", "1"); err != nil {
		t.Fatalf("kill sidecar: %v %s", err, out)
	}
	got = waitPod(t, c, ns, "web", 30*time.Second, "sidecar restarted", func(p *v1.Pod) bool {
		s := p.Status.InitContainerStatuses[1]
		return s.RestartCount == 1 && s.State.Running != nil && podReady(p)
	})
	if got.Status.ContainerStatuses[0].RestartCount != 0 || got.Status.Phase != v1.PodRunning {
		t.Fatalf("app restarted or pod not running: %+v", got.Status)
	}

	// Deletion: app first, then sidecars in reverse order.
	before := len(readJournal(t, dir))
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 40*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return err != nil
	}, "pod gone")
	j := readJournal(t, dir)[before:]
	if strings.Join(j, " ") != "app-term sc2-term sc1-term" {
		t.Fatalf("stop order: %v", j)
	}

	// restartPolicy Never: the app completes, the pod succeeds, the sidecar
	// is stopped.
	dir2 := t.TempDir()
	job := journalPod("job", node, dir2)
	job.Spec.RestartPolicy = v1.RestartPolicyNever
	job.Spec.InitContainers = []v1.Container{step("sc", true, true)}
	job.Spec.Containers = []v1.Container{step("work", false, false)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "job", 60*time.Second, "Succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(strings.Join(readJournal(t, dir2), " "), "sc-term")
	}, "sidecar of the completed pod stopped")
}
