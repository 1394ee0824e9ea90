package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
		// A sizeLimit larger than the pod may use: sized at the pod's
		// memory limit, as upstream.
		{Name: "big", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Ti"))}}},
	}
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec", ReadOnly: true},
		{Name: "info", MountPath: "/etc/podinfo"}, {Name: "mem", MountPath: "/mem"}, {Name: "big", MountPath: "/big"},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Volumes nodelet cannot provide (a PVC that does not exist, a
	// hostPath of the wrong type): the pod waits with FailedMount.
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
	if got := exec("grep ' /big ' /proc/mounts"); !strings.Contains(got, "size=65536k") {
		t.Errorf("memory emptyDir with sizeLimit 1Ti not sized by the pod's 64Mi memory limit: %s", got)
	}
	// As upstream: memory-backed volumes never swap where tmpfs can say so
	// (kernel 6.4 and newer, outside a user namespace).
	if noswap := tmpfsNoswap(t); noswap != strings.Contains(exec("grep ' /mem ' /proc/mounts"), "noswap") || noswap != strings.Contains(exec("grep ' /etc/sec ' /proc/mounts"), "noswap") {
		t.Errorf("tmpfs noswap supported %v, but the memory emptyDir and secret are mounted:\n%s", noswap, exec("grep -E ' /mem | /etc/sec ' /proc/mounts"))
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

	for pod, want := range map[string]string{"pvc": `error processing PVC ` + ns + `/nope: persistentvolumeclaims "nope" not found`, "badhost": "is not a Directory"} {
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

// volExec returns a function running `sh -c cmd` in the pod's running
// container c and returning its trimmed stdout (an error when it fails).
func volExec(t *testing.T, c *framework.Cluster, pod, ctr string) func(cmd string) (string, error) {
	return func(cmd string) (string, error) {
		t.Helper()
		rc := c.RunningContainer(t, pod, ctr)
		if rc == nil {
			return "", fmt.Errorf("no running container %s in pod %s", ctr, pod)
		}
		out, stderr, err := c.Runtime.ExecSync(context.Background(), rc.Id, []string{"sh", "-c", cmd}, 10*time.Second)
		if err != nil {
			return strings.TrimSpace(string(out)), fmt.Errorf("%q: %v: %s", cmd, err, stderr)
		}
		return strings.TrimSpace(string(out)), nil
	}
}

// volMust runs cmd with exec and fails the test when it fails.
func volMust(t *testing.T, exec func(string) (string, error), cmd string) string {
	t.Helper()
	out, err := exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func volLabel(t *testing.T, c *framework.Cluster, ns, pod, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":{%q:%q}}}`, key, value, key, value)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeFSGroup: the pod's fsGroup on emptyDir, configMap, secret,
// downwardAPI and projected volumes as upstream (group, group permissions,
// setgid directories, item modes | group read), proven from inside a
// container running as a non-root user that reads a 0400 secret through the
// group only; hostPath untouched. Then fsGroupChangePolicy: a file whose
// group a container changed stays changed across syncs (a label change,
// which also reaches the downwardAPI files), and after a nodelet restart
// (volumes set up again) OnRootMismatch leaves it while Always fixes it.
func TestVolumeFSGroup(t *testing.T) {
	const node = "e2e-vol-fsgroup"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "fsgroup")
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	if err := os.Chmod(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}

	owned := busyboxPod("owned", node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	owned.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), RunAsUser: ptr.To[int64](1000)}
	owned.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items:                []v1.KeyToPath{{Key: "greeting", Path: "greeting", Mode: ptr.To[int32](0o400)}}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
	}
	owned.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"},
		{Name: "info", MountPath: "/etc/info"}, {Name: "host", MountPath: "/host"},
	}
	// Root in the container, so it can change a file's group; the file is
	// 0600 with group 3000 afterwards.
	script := "touch /data/f && chgrp 3000 /data/f && chmod 600 /data/f && touch /ready; trap 'exit 0' TERM; while true; do sleep 0.2; done"
	policyPod := func(name string, policy v1.PodFSGroupChangePolicy) *v1.Pod {
		p := busyboxPod(name, node, script)
		p.Labels = map[string]string{"round": "0"}
		p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), FSGroupChangePolicy: &policy}
		p.Spec.Volumes = []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "round", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['round']"}}}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "info", MountPath: "/info"}}
		return p
	}
	for _, p := range []*v1.Pod{owned, policyPod("onroot", v1.FSGroupChangeOnRootMismatch), policyPod("always", v1.FSGroupChangeAlways)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"owned", "onroot", "always"} {
		waitPod(t, c, ns, p, 60*time.Second, "Ready", podReady)
	}

	exec := volExec(t, c, "owned", "c")
	if groups := volMust(t, exec, "id -G"); !strings.Contains(" "+groups+" ", " 2000 ") {
		t.Errorf("the container's groups %q lack the fsGroup", groups)
	}
	for cmd, want := range map[string]string{
		"id -u":                 "1000",
		"stat -c '%g %a' /data": "2000 2777",
		"touch /data/new && stat -c '%g' /data/new": "2000", // setgid: new files get the group
		"stat -c '%g %a' /etc/cfg":                  "2000 2755",
		"stat -L -c '%g %a' /etc/cfg/greeting":      "2000 440", // item mode 0400 | group read
		"cat /etc/cfg/greeting":                     "hello",
		"stat -c '%g %a' /etc/sec":                  "2000 2755",
		"stat -L -c '%g %a' /etc/sec/password":      "2000 440",
		"cat /etc/sec/password":                     "s3cret", // as uid 1000: through the group only
		"stat -L -c '%g %a' /etc/info/labels":       "2000 644",
		// The projected service account token: owned by the pod's only
		// user, 0600 | group read.
		"stat -L -c '%u %g %a' /var/run/secrets/kubernetes.io/serviceaccount/token": "1000 2000 640",
		"stat -c '%g %a' /host": "0 755", // hostPath: untouched
	} {
		if got, err := exec(cmd); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", cmd, got, err, want)
		}
	}

	onroot, always := volExec(t, c, "onroot", "c"), volExec(t, c, "always", "c")
	for _, e := range []func(string) (string, error){onroot, always} {
		framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool { _, err := e("test -f /ready"); return err == nil }, "the container changed its file")
		if got := volMust(t, e, "stat -c '%g %a' /data/f"); got != "3000 600" {
			t.Fatalf("/data/f is %q before any resync", got)
		}
	}
	// A label (and annotation) change syncs the pods: it reaches their
	// downwardAPI files, and no policy re-walks a volume on a sync.
	start := time.Now()
	for _, p := range []string{"onroot", "always"} {
		volLabel(t, c, ns, p, "round", "1")
	}
	for name, e := range map[string]func(string) (string, error){"onroot": onroot, "always": always} {
		framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
			labels, _ := e("cat /info/labels")
			round, _ := e("cat /info/round")
			return strings.Contains(labels, `round="1"`) && round == "1"
		}, "the label change in %s's downwardAPI files", name)
		if got := volMust(t, e, "stat -c '%g %a' /data/f"); got != "3000 600" {
			t.Errorf("%s: a sync re-walked the emptyDir: /data/f is %q", name, got)
		}
	}
	t.Logf("label and annotation change visible in the pods' files after %v", time.Since(start).Round(100*time.Millisecond))

	// nodelet restarts: every volume is set up again. A label changed
	// meanwhile shows when the pods were synced.
	n.Stop()
	for _, p := range []string{"onroot", "always"} {
		volLabel(t, c, ns, p, "round", "2")
	}
	n.Start()
	for name, e := range map[string]func(string) (string, error){"onroot": onroot, "always": always} {
		framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
			round, _ := e("cat /info/round")
			return round == "2"
		}, "%s synced by the restarted nodelet", name)
	}
	if got := volMust(t, onroot, "stat -c '%g %a' /data/f"); got != "3000 600" {
		t.Errorf("OnRootMismatch walked a volume whose root was right: /data/f is %q", got)
	}
	if got := volMust(t, always, "stat -c '%g %a' /data/f"); got != "2000 660" {
		t.Errorf("Always did not walk the volume again: /data/f is %q, want \"2000 660\"", got)
	}
}

// TestVolumeDownwardAPIResources: resourceFieldRef items with divisors, a
// limit the container does not set being the node's allocatable; and a
// Secret update reaching a running pod's secret volume within syncFrequency
// (30 s) plus the cache TTL.
func TestVolumeDownwardAPIResources(t *testing.T) {
	const node = "e2e-vol-downward"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "downward")
	ctx := context.Background()
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Data: map[string][]byte{"password": []byte("one")}}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod("res", node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi"),
			v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")},
	}
	field := func(path, res, divisor string) v1.DownwardAPIVolumeFile {
		f := v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: res}}
		if divisor != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(divisor)
		}
		return f
	}
	p.Spec.Volumes = []v1.Volume{
		{Name: "res", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			field("cpu_request_m", "requests.cpu", "1m"),
			field("cpu_request", "requests.cpu", ""),
			field("cpu_limit_m", "limits.cpu", "1m"),
			field("mem_request", "requests.memory", ""),
			field("mem_request_mi", "requests.memory", "1Mi"),
			field("mem_limit_ki", "limits.memory", "1Ki"),
			field("eph_request_mi", "requests.ephemeral-storage", "1Mi"),
			field("eph_limit_gi", "limits.ephemeral-storage", "1Gi"),
		}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "res", MountPath: "/res"}, {Name: "sec", MountPath: "/sec"}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "res", 60*time.Second, "Ready", podReady)
	nodeObj, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := nodeObj.Status.Allocatable
	ceilDiv := func(a, b int64) string { return fmt.Sprint((a + b - 1) / b) }
	exec := volExec(t, c, "res", "c")
	for file, want := range map[string]string{
		"cpu_request_m":  "250",
		"cpu_request":    "1", // 0.25 cpu, rounded up
		"cpu_limit_m":    fmt.Sprint(alloc.Cpu().MilliValue()),
		"mem_request":    "67108864",
		"mem_request_mi": "64",
		"mem_limit_ki":   "131072",
		"eph_request_mi": "1024",
		"eph_limit_gi":   ceilDiv(alloc.StorageEphemeral().Value(), 1<<30),
	} {
		if got, err := exec("cat /res/" + file); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", file, got, err, want)
		}
	}

	// A Secret update reaches the running pod.
	if got := volMust(t, exec, "cat /sec/password"); got != "one" {
		t.Fatalf("secret %q", got)
	}
	sec.Data["password"] = []byte("two")
	if _, err := c.Client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.Eventually(t, 70*time.Second, 500*time.Millisecond, func() bool {
		got, _ := exec("cat /sec/password")
		return got == "two"
	}, "the Secret update in the pod")
	t.Logf("Secret update visible in the pod after %v", time.Since(start).Round(time.Second))
}

// TestVolumeMountFailures: a missing ConfigMap holds its pod back with
// FailedMount until it is created, then the pod starts with it; a missing
// optional one lets its pod start with an empty directory (and its files
// appear once it is created); a PVC that does not exist, a CSI driver not
// registered (upstream's message) and a volume type the node has no plugin
// for (NFS) give FailedMount saying so.
func TestVolumeMountFailures(t *testing.T) {
	const node = "e2e-vol-failures"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "mountfail")
	ctx := context.Background()
	mk := func(name string, src v1.VolumeSource) *v1.Pod {
		p := busyboxPod(name, node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
		p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: src}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
		return p
	}
	cmRef := func(name string, optional bool) v1.VolumeSource {
		return v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: name}, Optional: ptr.To(optional)}}
	}
	pods := []*v1.Pod{
		mk("late", cmRef("late", false)),
		mk("optional", cmRef("later", true)),
		mk("pvc", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}),
		mk("csi", v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "inline.csi.example.com"}}),
		mk("nfs", v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs.example.com", Path: "/export"}}),
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	failedMount := func(pod, want string) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
			evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount,involvedObject.name=" + pod})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Type == v1.EventTypeWarning && strings.Contains(e.Message, want) {
					return true
				}
			}
			return false
		}, "a FailedMount event for %s saying %q", pod, want)
		got := waitPod(t, c, ns, pod, 10*time.Second, "waiting with the mount error", func(p *v1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].State.Waiting != nil && strings.Contains(cs[0].State.Waiting.Message, want)
		})
		if got.Status.Phase != v1.PodPending {
			t.Errorf("%s: phase %s, want Pending", pod, got.Status.Phase)
		}
	}
	failedMount("late", `configmaps "late" not found`)
	failedMount("pvc", `error processing PVC `+ns+`/claim: persistentvolumeclaims "claim" not found`)
	failedMount("csi", "kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name inline.csi.example.com not found in the list of registered CSI drivers")
	failedMount("nfs", "volume type nfs is not supported by this node: no volume plugin for it")

	// The optional one runs, with an empty directory.
	waitPod(t, c, ns, "optional", 60*time.Second, "Ready", podReady)
	optional := volExec(t, c, "optional", "c")
	if got := volMust(t, optional, "ls /v | wc -l"); got != "0" {
		t.Errorf("the missing optional ConfigMap's volume is not empty: %s", volMust(t, optional, "ls -la /v"))
	}
	// The missing one created: the pod starts (the pod worker retries
	// with back-off; a missing object is never cached).
	start := time.Now()
	for _, name := range []string{"late", "later"} {
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"key": "value-" + name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPod(t, c, ns, "late", 60*time.Second, "Ready once its ConfigMap exists", podReady)
	t.Logf("pod started %v after its ConfigMap was created", time.Since(start).Round(100*time.Millisecond))
	if got := volMust(t, volExec(t, c, "late", "c"), "cat /v/key"); got != "value-late" {
		t.Errorf("late: /v/key %q", got)
	}
	// The optional one's files appear in the running pod.
	framework.Eventually(t, 70*time.Second, 500*time.Millisecond, func() bool {
		got, _ := optional("cat /v/key")
		return got == "value-later"
	}, "the optional ConfigMap's files in the running pod")
	t.Logf("optional ConfigMap visible in the running pod %v after its creation", time.Since(start).Round(time.Second))
}

// volSharedMount bind-mounts dir on itself as a shared mount (what systemd
// makes of / on a usual host; this machine's / is private), so that mount
// propagation can work through it. Everything mounted under it is
// unmounted when the test ends.
func volSharedMount(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { volUnmountAll(t, dir) })
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
}

// volMounts lists the mount points at or under dir (host's view).
func volMounts(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func volUnmountAll(t *testing.T, dir string) {
	for i := 0; i < 10; i++ {
		m := volMounts(t, dir)
		if len(m) == 0 {
			return
		}
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		for _, p := range m {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
	}
}

// TestVolumeMountPropagation: HostToContainer (a mount made on the host
// under a hostPath after the container started is visible inside; the same
// hostPath mounted without propagation does not see it) and Bidirectional
// (a privileged container's mount is visible on the host); the runtime got
// each mount's propagation.
func TestVolumeMountPropagation(t *testing.T) {
	const node = "e2e-vol-propagation"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "propagation")
	ctx := context.Background()
	h2c, bidi := filepath.Join(t.TempDir(), "h2c"), filepath.Join(t.TempDir(), "bidi")
	for _, d := range []string{h2c, bidi} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		volSharedMount(t, d)
	}
	hostPath := func(p string) v1.VolumeSource {
		return v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: p, Type: ptr.To(v1.HostPathDirectory)}}
	}
	slave := busyboxPod("slave", node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	slave.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: hostPath(h2c)}}
	slave.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "h", MountPath: "/host", MountPropagation: ptr.To(v1.MountPropagationHostToContainer)},
		{Name: "h", MountPath: "/private"},
	}
	shared := busyboxPod("shared", node, "mkdir -p /host/inner && mount -t tmpfs -o size=1m tmpfs /host/inner && echo from-container >/host/inner/f; trap 'exit 0' TERM; while true; do sleep 0.2; done")
	shared.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: hostPath(bidi)}}
	shared.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	shared.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/host", MountPropagation: ptr.To(v1.MountPropagationBidirectional)}}
	for _, p := range []*v1.Pod{slave, shared} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPod(t, c, ns, "slave", 60*time.Second, "Ready", podReady)
	waitPod(t, c, ns, "shared", 60*time.Second, "Ready", podReady)

	// What the runtime was asked for.
	for pod, want := range map[string]map[string]runtimeapi.MountPropagation{
		"slave":  {"/host": runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, "/private": runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		"shared": {"/host": runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
	} {
		st := c.ContainerStatus(t, c.RunningContainer(t, pod, "c").Id)
		got := map[string]runtimeapi.MountPropagation{}
		for _, m := range st.Mounts {
			got[m.ContainerPath] = m.Propagation
		}
		for path, prop := range want {
			if got[path] != prop {
				t.Errorf("%s: %s mounted with %v, want %v", pod, path, got[path], prop)
			}
		}
	}

	// HostToContainer: the host mounts a tmpfs under the hostPath now.
	sub := filepath.Join(h2c, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "hello"), []byte("from-host"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec := volExec(t, c, "slave", "c")
	if got, err := exec("cat /host/sub/hello"); err != nil || got != "from-host" {
		t.Errorf("HostToContainer: the host's new mount is not visible inside: %q %v", got, err)
	}
	if got, err := exec("grep ' /host/sub ' /proc/mounts | cut -d' ' -f3"); err != nil || got != "tmpfs" {
		t.Errorf("HostToContainer: /host/sub is not a tmpfs inside: %q %v", got, err)
	}
	if got, err := exec("ls /private/sub | wc -l"); err != nil || got != "0" {
		t.Errorf("without propagation the host's new mount should not be visible: %q %v", got, err)
	}

	// Bidirectional: the container's mount reached the host.
	inner := filepath.Join(bidi, "inner")
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
		data, err := os.ReadFile(filepath.Join(inner, "f"))
		return err == nil && strings.TrimSpace(string(data)) == "from-container"
	}, "the container's file on the host")
	if m := volMounts(t, inner); len(m) == 0 {
		t.Errorf("Bidirectional: the container's tmpfs is not mounted on the host")
	}
}

// TestVolumeCleanupAfterRestart: a pod deleted while nodelet is down has
// its volumes unmounted (secret, projected and memory emptyDir tmpfs) and
// its directory removed when nodelet comes back; its hostPath keeps what it
// held and what the pod wrote there.
func TestVolumeCleanupAfterRestart(t *testing.T) {
	const node = "e2e-vol-cleanup"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "cleanup")
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "keep"), []byte("node data"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := busyboxPod("gone", node, "echo disk >/disk/f; echo mem >/mem/f; echo pod >/host/written; touch /ready; trap 'exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Volumes = []v1.Volume{
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "sec", MountPath: "/sec"}, {Name: "mem", MountPath: "/mem"}, {Name: "disk", MountPath: "/disk"}, {Name: "host", MountPath: "/host"},
	}
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "gone", 60*time.Second, "Ready", podReady)
	exec := volExec(t, c, "gone", "c")
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool { _, err := exec("test -f /ready"); return err == nil }, "the pod wrote its files")
	podDir := filepath.Join(n.RootDir, "pods", string(created.UID))
	// secret, the kube-api-access projected volume, the memory emptyDir.
	if m := volMounts(t, podDir); len(m) < 3 {
		t.Fatalf("mounts under the pod directory: %v, want at least 3 tmpfs", m)
	}

	n.Stop()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	n.Start()
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		_, err := os.Lstat(podDir)
		return len(volMounts(t, podDir)) == 0 && os.IsNotExist(err)
	}, "the deleted pod's volumes unmounted and its directory removed")
	// The sandbox is removed after the volumes are torn down, so it may
	// outlive the directory by a moment.
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return len(c.Sandboxes(t, "gone")) == 0
	}, "the deleted pod's sandboxes removed")
	for f, want := range map[string]string{"keep": "node data", "written": "pod\n"} {
		if data, err := os.ReadFile(filepath.Join(host, f)); err != nil || string(data) != want {
			t.Errorf("hostPath file %s: %q %v, want %q", f, data, err, want)
		}
	}
}

// tmpfsNoswap tells whether tmpfs takes noswap here: the kernel is 6.4 or
// newer and this process (as nodelet, on the same host) is in the initial
// user namespace.
func tmpfsNoswap(t *testing.T) bool {
	t.Helper()
	if m, err := os.ReadFile("/proc/self/uid_map"); err == nil && len(strings.Fields(string(m))) == 3 && strings.Join(strings.Fields(string(m)), " ") != "0 0 4294967295" {
		return false
	}
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(b), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", b, err)
	}
	return major > 6 || (major == 6 && minor >= 4)
}
