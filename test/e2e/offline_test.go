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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// Offline autonomy (issue 20): nodelet started while the API server is
// gone runs its API pods from the local checkpoint.

// offlinePod is a busybox pod that reads a ConfigMap as a volume and as an
// env var (and has the default service account token volume).
func offlinePod(name, node, cm, script string) *v1.Pod {
	p := busyboxPod(name, node, script)
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}}
	c := &p.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	c.Env = []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}, Key: "greeting"}}}}
	return p
}

// secretEnvPod is a busybox pod with an env var from a Secret.
func secretEnvPod(name, node, secret string) *v1.Pod {
	p := busyboxPod(name, node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: secret}, Key: "password"}}}}
	return p
}

const loop = "trap 'exit 0' TERM; while true; do sleep 0.2; done"

func createObjects(t *testing.T, c *framework.Cluster, ns string, objs ...any) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.ConfigMap:
			_, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		case *v1.Secret:
			_, err = c.Client.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = c.Client.CoreV1().Pods(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fromCheckpoint waits until nodelet's /healthz?verbose reports want pods
// run from the checkpoint.
func fromCheckpoint(t *testing.T, n *framework.Nodelet, want string) string {
	t.Helper()
	var body string
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, body, _ = n.Healthz()
		return strings.Contains(body, want)
	}, "healthz reporting %q", want)
	return body
}

// exec runs cmd in a container through the CRI.
func execIn(t *testing.T, c *framework.Cluster, id string, cmd ...string) string {
	t.Helper()
	out, _, err := c.Runtime.ExecSync(context.Background(), id, cmd, 10*time.Second)
	if err != nil {
		t.Fatalf("exec %v in %s: %v", cmd, id, err)
	}
	return strings.TrimSpace(string(out))
}

// readySandboxes counts the pod's ready sandboxes.
func readySandboxes(t *testing.T, c *framework.Cluster, podName string) int {
	n := 0
	for _, b := range c.Sandboxes(t, podName) {
		if b.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			n++
		}
	}
	return n
}

// TestOfflineRestart: the API server stopped, nodelet killed and started
// again: the pods keep running with the same container IDs, a container
// that exits meanwhile is restarted, and the restart reaches the API once
// the API server is back.
func TestOfflineRestart(t *testing.T) {
	name := "e2e-offline-restart"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "offline")
	createObjects(t, c, ns,
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello"}},
		offlinePod("or-steady", name, "cfg", loop),
		offlinePod("or-crasher", name, "cfg", "trap 'exit 0' TERM; sleep 8; exit 2"))
	steady := waitPod(t, c, ns, "or-steady", 60*time.Second, "Ready", podReady)
	waitPod(t, c, ns, "or-crasher", 60*time.Second, "Ready", podReady)
	before := steady.Status.ContainerStatuses[0].ContainerID
	time.Sleep(3 * time.Second) // a checkpoint write period

	c.StopAPIServer(t)
	n.Kill()
	start := time.Now()
	n.Start()
	body := fromCheckpoint(t, n, "2 pods run from the checkpoint")
	if !strings.Contains(body, "API server unreachable") {
		t.Errorf("healthz does not report the API server unreachable:\n%s", body)
	}
	// nodelet pods tells them apart (issue 22).
	if out, _, _ := cli(t, n, "pods", "-o", "wide"); podLine(out, "or-steady") == nil || podLine(out, "or-steady")[7] != "checkpoint" {
		t.Errorf("nodelet pods -o wide offline: SOURCE is not checkpoint:\n%s", out)
	}
	// The crasher exits (8 s) and is restarted, without the API server.
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		rc := c.RunningContainer(t, "or-crasher", "c")
		return rc != nil && rc.Metadata.Attempt >= 1
	}, "the crasher restarted offline")
	t.Logf("offline: crasher restarted %v after nodelet's start", time.Since(start).Round(100*time.Millisecond))
	rc := c.RunningContainer(t, "or-steady", "c")
	if rc == nil || "containerd://"+rc.Id != before {
		t.Fatalf("steady's container changed across the offline restart: before %s, now %+v", before, rc)
	}
	if got := readySandboxes(t, c, "or-steady"); got != 1 {
		t.Errorf("steady has %d ready sandboxes, want 1", got)
	}
	if !strings.Contains(n.Log(), "Running a pod from the offline checkpoint") {
		t.Error("nodelet's log does not say it runs pods from the checkpoint")
	}

	back := time.Now()
	c.StartAPIServer(t)
	p := waitPod(t, c, ns, "or-crasher", 60*time.Second, "the offline restart reported", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1
	})
	t.Logf("API server back: crasher's restarts (%d) in the API %v after its start", p.Status.ContainerStatuses[0].RestartCount, time.Since(back).Round(100*time.Millisecond))
	got := c.Pod(t, ns, "or-steady").Status.ContainerStatuses[0]
	if got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("steady after the API server's return: %s (before %s), restarts %d", got.ContainerID, before, got.RestartCount)
	}
	fromCheckpoint(t, n, "0 pods run from the checkpoint")
	if out, _, _ := cli(t, n, "pods", "-o", "wide"); podLine(out, "or-steady") == nil || podLine(out, "or-steady")[7] != "api" {
		t.Errorf("nodelet pods -o wide once the API server confirmed the pods: SOURCE is not api:\n%s", out)
	}
}

// TestOfflineReboot: the API server stopped, nodelet stopped and every
// sandbox and container of its pods removed from containerd, their tmpfs
// volumes unmounted (a reboot): started again, nodelet runs every pod from
// the checkpoint with its ConfigMap and token; a pod needing a Secret (not
// kept without --offline-secrets) waits with a clear reason; a pod whose
// entry was corrupted is reported and skipped while the rest run. Once the
// API server is back both start too, and no pod has two sandboxes.
func TestOfflineReboot(t *testing.T) {
	name := "e2e-offline-reboot"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "offline")
	createObjects(t, c, ns,
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw"}, StringData: map[string]string{"password": "s3cret"}},
		offlinePod("ob-web", name, "cfg", loop),
		offlinePod("ob-worker", name, "cfg", loop),
		secretEnvPod("ob-secret", name, "pw"),
		offlinePod("ob-corrupt", name, "cfg", loop))
	uids := map[string]string{}
	for _, pn := range []string{"ob-web", "ob-worker", "ob-secret", "ob-corrupt"} {
		uids[pn] = string(waitPod(t, c, ns, pn, 60*time.Second, "Ready", podReady).UID)
	}
	time.Sleep(3 * time.Second) // a checkpoint write period
	oldWeb := c.RunningContainer(t, "ob-web", "c").Id

	c.StopAPIServer(t)
	n.Stop()
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, n.Exited, "nodelet stopped")
	// The reboot: containerd has nothing of the node's pods, the tmpfs
	// volumes are gone.
	ctx := context.Background()
	for _, uid := range uids {
		boxes, _ := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}})
		for _, b := range boxes {
			_ = c.Runtime.StopPodSandbox(ctx, b.Id)
			if err := c.Runtime.RemovePodSandbox(ctx, b.Id); err != nil {
				t.Fatal(err)
			}
		}
	}
	framework.UnmountUnder(filepath.Join(n.RootDir, "pods"), t.Logf)
	entry := filepath.Join(n.RootDir, "offline", "pods", uids["ob-corrupt"]+".json")
	data, err := os.ReadFile(entry)
	if err != nil {
		t.Fatalf("the corrupt pod's checkpoint entry: %v", err)
	}
	if fi, _ := os.Stat(entry); fi.Mode().Perm() != 0o600 {
		t.Errorf("entry mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Dir(entry)); fi.Mode().Perm() != 0o700 {
		t.Errorf("checkpoint dir mode %v, want 0700", fi.Mode().Perm())
	}
	if strings.Contains(string(data), "s3cret") || strings.Contains(string(data), "czNjcmV0") {
		t.Error("a checkpoint entry holds the Secret without --offline-secrets")
	}
	if err := os.WriteFile(entry, data[:len(data)/2], 0o600); err != nil { // a partial write
		t.Fatal(err)
	}

	start := time.Now()
	n.Start()
	var web, worker *runtimeapi.Container
	framework.Eventually(t, 90*time.Second, 200*time.Millisecond, func() bool {
		web, worker = c.RunningContainer(t, "ob-web", "c"), c.RunningContainer(t, "ob-worker", "c")
		return web != nil && worker != nil
	}, "the pods running again from the checkpoint")
	t.Logf("reboot: all checkpointed pods running %v after nodelet's start", time.Since(start).Round(100*time.Millisecond))
	if web.Id == oldWeb {
		t.Fatal("web's container was not recreated")
	}
	for _, id := range []string{web.Id, worker.Id} {
		if got := execIn(t, c, id, "cat", "/cfg/greeting"); got != "hello" {
			t.Errorf("ConfigMap volume offline: %q", got)
		}
		if got := execIn(t, c, id, "sh", "-c", "echo $GREETING"); got != "hello" {
			t.Errorf("ConfigMap env offline: %q", got)
		}
		if got := execIn(t, c, id, "sh", "-c", "wc -c < /var/run/secrets/kubernetes.io/serviceaccount/token"); got == "0" {
			t.Error("empty service account token offline")
		}
	}
	sb := c.Sandboxes(t, "ob-web")
	if len(sb) != 1 || sb[0].Metadata.Uid != uids["ob-web"] {
		t.Errorf("web's sandboxes after the reboot: %+v, want one with UID %s", sb, uids["ob-web"])
	}
	body := fromCheckpoint(t, n, "1 corrupt entries skipped")
	if !strings.Contains(body, "3 pods run from the checkpoint") {
		t.Errorf("healthz:\n%s", body)
	}
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		return strings.Contains(n.Log(), "--offline-secrets is off")
	}, "the secret pod's wait explained in the log")
	if c.RunningContainer(t, "ob-secret", "c") != nil || c.RunningContainer(t, "ob-corrupt", "c") != nil {
		t.Error("the secret pod or the corrupt pod runs offline")
	}
	if !strings.Contains(n.Log(), "Skipping a checkpoint entry that cannot be read") {
		t.Error("the corrupt entry is not reported in the log")
	}

	back := time.Now()
	c.StartAPIServer(t)
	for _, pn := range []string{"ob-web", "ob-worker", "ob-secret", "ob-corrupt"} {
		waitPod(t, c, ns, pn, 90*time.Second, "Ready after the API server's return", podReady)
	}
	t.Logf("API server back: every pod Ready in the API %v after its start", time.Since(back).Round(100*time.Millisecond))
	for _, pn := range []string{"ob-web", "ob-worker", "ob-secret", "ob-corrupt"} {
		if got := readySandboxes(t, c, pn); got != 1 {
			t.Errorf("%s has %d ready sandboxes, want 1", pn, got)
		}
	}
	if got := c.RunningContainer(t, "ob-web", "c"); got == nil || got.Id != web.Id {
		t.Errorf("web's offline container replaced once the API server was back: %v -> %v", web.Id, got)
	}
}

// TestOfflineReconcile: while nodelet is down, one pod is deleted and
// another created; nodelet starts without the API server and runs what its
// checkpoint has (the deleted one included: nothing is removed for lack of
// the API server); when the API server is back the deleted pod stops, the
// new one starts, the other is kept without a restart.
func TestOfflineReconcile(t *testing.T) {
	name := "e2e-offline-reconcile"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "offline")
	ctx := context.Background()
	createObjects(t, c, ns,
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello"}},
		offlinePod("oc-kept", name, "cfg", loop),
		offlinePod("oc-deleted", name, "cfg", loop))
	kept := waitPod(t, c, ns, "oc-kept", 60*time.Second, "Ready", podReady)
	deleted := waitPod(t, c, ns, "oc-deleted", 60*time.Second, "Ready", podReady)
	keptID := kept.Status.ContainerStatuses[0].ContainerID
	time.Sleep(3 * time.Second)

	n.Kill()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "oc-deleted", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	createObjects(t, c, ns, offlinePod("oc-new", name, "cfg", loop))
	c.StopAPIServer(t)
	n.Start()
	fromCheckpoint(t, n, "2 pods run from the checkpoint")
	time.Sleep(5 * time.Second)
	if c.RunningContainer(t, "oc-deleted", "c") == nil {
		t.Fatal("the deleted pod was stopped without the API server saying so")
	}

	back := time.Now()
	c.StartAPIServer(t)
	waitPod(t, c, ns, "oc-new", 60*time.Second, "Ready", podReady)
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		boxes, _ := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(deleted.UID)}})
		for _, b := range boxes {
			if b.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				return false
			}
		}
		return true
	}, "the pod deleted meanwhile stopped")
	t.Logf("API server back: converged (new pod Ready, deleted one stopped) %v after its start", time.Since(back).Round(100*time.Millisecond))
	got := c.Pod(t, ns, "oc-kept").Status.ContainerStatuses[0]
	if got.ContainerID != keptID || got.RestartCount != 0 {
		t.Errorf("kept pod: %s (before %s), restarts %d", got.ContainerID, keptID, got.RestartCount)
	}
	entries, _ := os.ReadDir(filepath.Join(n.RootDir, "offline", "pods"))
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		entries, _ = os.ReadDir(filepath.Join(n.RootDir, "offline", "pods"))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), string(deleted.UID)) {
				return false
			}
		}
		return true
	}, "the deleted pod's checkpoint entry pruned")
	if len(entries) != 2 {
		t.Errorf("checkpoint entries after reconciling: %d, want 2 (kept, new)", len(entries))
	}
}
