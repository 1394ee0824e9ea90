package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// podEnv returns the environment a running pod's container printed (it runs
// `env; sleep`), read with kubectl logs.
func podEnv(t *testing.T, c *framework.Cluster, ns, pod string) map[string]string {
	t.Helper()
	var out string
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		o, err := c.KubectlOut(t, 20*time.Second, "-n", ns, "logs", pod)
		out = o
		return err == nil && strings.Contains(o, "END_OF_ENV")
	}, "env of %s", pod)
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestPodEnvironment: env from ConfigMaps and Secrets (keys and envFrom
// with a prefix), resourceFieldRef with divisor, fieldRefs, $(VAR)
// expansion, service variables (with and without enableServiceLinks), args
// over the image's CMD; a missing required ConfigMap gives
// CreateContainerConfigError and an event, and the pod starts once it
// exists.
func TestPodEnvironment(t *testing.T) {
	const node = "env-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "env")
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"color": "blue", "size": "9", "dashed-key": "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.Client.CoreV1().Services(ns).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-front"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "http", Port: 8080, Protocol: v1.ProtocolTCP}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// PID 1's environment as the runtime gave it (a shell drops names that are not identifiers).
	script := `tr '\0' '\n' </proc/1/environ; echo END_OF_ENV; sleep 3600`
	mk := func(name string, links bool) *v1.Pod {
		p := busyboxPod(name, node, "")
		p.Labels = map[string]string{"tier": "backend"}
		p.Spec.EnableServiceLinks = ptr.To(links)
		ctr := &p.Spec.Containers[0]
		// args only: the image's CMD is replaced, its (empty) ENTRYPOINT kept.
		ctr.Command = nil
		ctr.Args = []string{"sh", "-c", script}
		ctr.Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		}
		ctr.EnvFrom = []v1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
		}
		ctr.Env = []v1.EnvVar{
			{Name: "COLOR", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "color"}}},
			{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
			{Name: "MAYBE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: ptr.To(true)}}},
			{Name: "CPU_MILLI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
			{Name: "MEM_LIMIT_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CPU_LIMIT", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			{Name: "POD_UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
			{Name: "TIER", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}},
			{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
			{Name: "SA", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}},
			{Name: "MIXED", Value: "$(COLOR)/$(CM_size)/$(WEB_FRONT_SERVICE_PORT)/$(UNDEFINED)"},
		}
		return p
	}
	for _, p := range []*v1.Pod{mk("links", true), mk("nolinks", false)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"links", "nolinks"} {
		waitPod(t, c, ns, name, 60*time.Second, "Running", podReady)
	}
	p := c.Pod(t, ns, "links")
	env := podEnv(t, c, ns, "links")
	cpuLimit := "?"
	if node, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
		cpuLimit = node.Status.Allocatable.Cpu().String()
	}
	want := map[string]string{
		"CM_dashed-key": "kept", // relaxed variable names, as upstream since v1.34
		"COLOR":         "blue", "PASSWORD": "s3cret", "password": "s3cret", "CM_color": "blue", "CM_size": "9",
		"CPU_MILLI": "250", "MEM_LIMIT_MI": "64", "CPU_LIMIT": cpuLimit,
		"POD_UID": string(p.UID), "TIER": "backend", "POD_IP": p.Status.PodIP, "HOST_IP": p.Status.HostIP, "SA": "default",
		"MIXED":                   "blue/9/8080/$(UNDEFINED)",
		"KUBERNETES_SERVICE_HOST": kube.Spec.ClusterIP, "KUBERNETES_SERVICE_PORT": "443",
		"WEB_FRONT_SERVICE_HOST": svc.Spec.ClusterIP, "WEB_FRONT_SERVICE_PORT_HTTP": "8080",
		"WEB_FRONT_PORT": "tcp://" + svc.Spec.ClusterIP + ":8080", "WEB_FRONT_PORT_8080_TCP_ADDR": svc.Spec.ClusterIP,
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("links: %s = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"MAYBE"} {
		if _, ok := env[k]; ok {
			t.Errorf("links: %s should not be set", k)
		}
	}
	env = podEnv(t, c, ns, "nolinks")
	if env["KUBERNETES_SERVICE_HOST"] != kube.Spec.ClusterIP {
		t.Errorf("nolinks: KUBERNETES_SERVICE_HOST = %q", env["KUBERNETES_SERVICE_HOST"])
	}
	if _, ok := env["WEB_FRONT_SERVICE_HOST"]; ok {
		t.Error("nolinks: WEB_FRONT_SERVICE_HOST set although enableServiceLinks is false")
	}
	if env["MIXED"] != "blue/9/$(WEB_FRONT_SERVICE_PORT)/$(UNDEFINED)" {
		t.Errorf("nolinks: MIXED = %q", env["MIXED"])
	}

	// A required ConfigMap that does not exist yet.
	late := busyboxPod("late", node, script)
	late.Spec.Containers[0].Env = []v1.EnvVar{{Name: "LATE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "later"}, Key: "v"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "late", 60*time.Second, "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
			strings.Contains(cs[0].State.Waiting.Message, `configmaps "later" not found`)
	})
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=late"})
		for _, e := range evs.Items {
			if e.Reason == "Failed" && strings.Contains(e.Message, `configmaps "later" not found`) {
				return true
			}
		}
		return false
	}, "Failed event for the missing ConfigMap")
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Data: map[string]string{"v": "arrived"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The ConfigMap cache keeps the miss for up to syncFrequency (30 s here).
	waitPod(t, c, ns, "late", 90*time.Second, "Running once the ConfigMap exists", podReady)
	t.Logf("pod started %v after its ConfigMap was created", time.Since(start).Round(time.Second))
	if env := podEnv(t, c, ns, "late"); env["LATE"] != "arrived" {
		t.Fatalf("LATE = %q", env["LATE"])
	}
}

// TestPodEnvFiles: env[].valueFrom.fileKeyRef (EnvFiles, beta and on in
// v1.37) as upstream's FileKeyRef e2e tests: an init container writes an
// env file into an emptyDir, the next init container and the app
// container read keys from it (a multi-line value, an optional missing key
// skipped); a required key that is not in the file leaves the container in
// CreateContainerConfigError naming the key.
func TestPodEnvFiles(t *testing.T) {
	const node = "envfiles-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "envfiles")
	ctx := context.Background()
	ref := func(key string, optional bool) *v1.EnvVarSource {
		return &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "config", Path: "config.env", Key: key, Optional: ptr.To(optional)}}
	}
	mk := func(name, key string) *v1.Pod {
		p := busyboxPod(name, node, `tr '\0' '\n' </proc/1/environ; echo END_OF_ENV; sleep 3600`)
		mount := []v1.VolumeMount{{Name: "config", MountPath: "/data"}}
		p.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.InitContainers = []v1.Container{
			{Name: "setup-envfile", Image: p.Spec.Containers[0].Image, VolumeMounts: mount,
				Command: []string{"sh", "-c", `printf "# written by an init container\nCONFIG_1='value1'\nCONFIG_2='two\nlines' # two lines\n" > /data/config.env`}},
			{Name: "use-envfile", Image: p.Spec.Containers[0].Image, Env: []v1.EnvVar{{Name: "CONFIG_1", ValueFrom: ref("CONFIG_1", false)}},
				Command: []string{"sh", "-c", `test "$CONFIG_1" = value1`}},
		}
		p.Spec.Containers[0].Env = []v1.EnvVar{
			{Name: "FIRST", ValueFrom: ref(key, false)},
			{Name: "SECOND", ValueFrom: ref("CONFIG_2", false)},
			{Name: "MAYBE", ValueFrom: ref("ABSENT", true)},
			{Name: "BOTH", Value: "$(FIRST)+$(SECOND)"},
		}
		return p
	}
	for _, p := range []*v1.Pod{mk("envfile", "CONFIG_1"), mk("missing-key", "NOT_IN_FILE")} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPod(t, c, ns, "envfile", 90*time.Second, "Running", podReady)
	env := podEnv(t, c, ns, "envfile")
	for k, v := range map[string]string{"FIRST": "value1", "SECOND": "two", "BOTH": "value1+two"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["MAYBE"]; ok {
		t.Error("MAYBE set although its optional key is not in the file")
	}
	if out, err := c.KubectlOut(t, 20*time.Second, "-n", ns, "logs", "envfile"); err != nil || !strings.Contains(out, "\nSECOND=two\nlines\n") {
		t.Errorf("SECOND's value not two lines (%v): %q", err, out)
	}
	waitPod(t, c, ns, "missing-key", 60*time.Second, "CreateContainerConfigError", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError" &&
			strings.Contains(cs[0].State.Waiting.Message, `environment variable key "NOT_IN_FILE" not found in file`)
	})
}
