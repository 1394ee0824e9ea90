package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

func TestClusterVolumes(t *testing.T) {
	name := "e2e-volumes"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "volumes")
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello", "other": "x"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"password": []byte("s3cret")}}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod("vols", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	p.Labels = map[string]string{"app": "vols"}
	p.Spec.Volumes = []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items:                []v1.KeyToPath{{Key: "greeting", Path: "greeting", Mode: ptr.To[int32](0o400)}}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("16Mi"))}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec", ReadOnly: true},
		{Name: "info", MountPath: "/etc/podinfo"}, {Name: "mem", MountPath: "/mem"},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Volumes nodelet cannot provide: the pod waits with FailedMount.
	pvc := busyboxPod("pvc", name, "true")
	pvc.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "nope"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	badHost := busyboxPod("badhost", name, "true")
	badHost.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/hostname", Type: ptr.To(v1.HostPathDirectory)}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, badHost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitPod(t, c, ns, "vols", 60*time.Second, "Ready", podReady)
	ctr := c.RunningContainer(t, "vols", "c")
	exec := func(cmd string) string {
		t.Helper()
		out, stderr, err := c.Runtime.ExecSync(ctx, ctr.Id, []string{"sh", "-c", cmd}, 10*time.Second)
		if err != nil {
			t.Fatalf("exec %q: %v %s", cmd, err, stderr)
		}
		return strings.TrimSpace(string(out))
	}
	for cmd, want := range map[string]string{
		"cat /etc/cfg/greeting":                                       "hello",
		"stat -L -c %a /etc/cfg/greeting":                             "400",
		"ls /etc/cfg | tr '\\n' ' '":                                  "greeting",
		"cat /etc/sec/password":                                       "s3cret",
		"cat /etc/podinfo/labels":                                     `app="vols"`,
		"grep ' /mem ' /proc/mounts | cut -d' ' -f3":                  "tmpfs",
		"grep ' /etc/sec ' /proc/mounts | cut -d' ' -f3":              "tmpfs",
		"cat /var/run/secrets/kubernetes.io/serviceaccount/namespace": ns,
	} {
		if got := exec(cmd); strings.TrimSpace(got) != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	if got := exec("grep ' /mem ' /proc/mounts"); !strings.Contains(got, "size=16384k") {
		t.Errorf("memory emptyDir not sized by sizeLimit: %s", got)
	}
	// The service account token authenticates as the pod's service account.
	token := exec("cat /var/run/secrets/kubernetes.io/serviceaccount/token")
	ca := exec("cat /var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
	sa, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:6443", BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca + "\n")}})
	if err != nil {
		t.Fatal(err)
	}
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the projected token does not authenticate: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":default"; got != want {
		t.Errorf("token user %q, want %q", got, want)
	}

	// A ConfigMap update reaches the running pod's file.
	cm.Data["greeting"] = "bonjour"
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.Eventually(t, 90*time.Second, time.Second, func() bool { return exec("cat /etc/cfg/greeting") == "bonjour" }, "the ConfigMap update in the pod")
	t.Logf("ConfigMap update visible in the pod after %v", time.Since(start).Round(time.Second))

	for pod, want := range map[string]string{"pvc": "persistentVolumeClaim is not supported yet", "badhost": "is not a Directory"} {
		got := waitPod(t, c, ns, pod, 30*time.Second, "waiting with the mount error", func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && strings.Contains(cs[0].State.Waiting.Message, want)
		})
		if got.Status.Phase != v1.PodPending {
			t.Errorf("%s phase %s, want Pending", pod, got.Status.Phase)
		}
	}
	evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount"})
	if len(evs.Items) == 0 {
		t.Error("no FailedMount events")
	}
}
