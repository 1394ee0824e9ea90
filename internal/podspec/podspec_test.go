package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDefaultPullPolicy(t *testing.T) {
	for image, want := range map[string]v1.PullPolicy{
		"busybox":                        v1.PullAlways,
		"busybox:latest":                 v1.PullAlways,
		"busybox:1.36":                   v1.PullIfNotPresent,
		"docker.io/library/busybox:1.36": v1.PullIfNotPresent,
		"localhost:5000/busybox":         v1.PullAlways,
		"localhost:5000/busybox:1":       v1.PullIfNotPresent,
		"busybox@sha256:abcd":            v1.PullIfNotPresent,
	} {
		if got := DefaultPullPolicy(image); got != want {
			t.Errorf("DefaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func TestSetDefaults(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		HostNetwork: true,
		Containers: []v1.Container{{
			Name: "c", Image: "busybox",
			Ports:     []v1.ContainerPort{{ContainerPort: 80}},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: mustQ("1")}},
		}},
		Volumes: []v1.Volume{{Name: "v"}},
	}}
	SetDefaults(pod)
	s := pod.Spec
	c := s.Containers[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"restartPolicy", s.RestartPolicy, v1.RestartPolicyAlways},
		{"dnsPolicy", s.DNSPolicy, v1.DNSClusterFirst},
		{"grace", *s.TerminationGracePeriodSeconds, int64(30)},
		{"schedulerName", s.SchedulerName, "default-scheduler"},
		{"enableServiceLinks", *s.EnableServiceLinks, true},
		{"imagePullPolicy", c.ImagePullPolicy, v1.PullAlways},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, v1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, v1.ProtocolTCP},
		{"hostPort on hostNetwork", c.Ports[0].HostPort, int32(80)},
		{"requests from limits", c.Resources.Requests.Cpu().String(), "1"},
		{"volume source", s.Volumes[0].EmptyDir != nil, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

func TestApplyStaticDefaults(t *testing.T) {
	mk := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metaName("web"), Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
	}
	a, b := mk(), mk()
	if err := ApplyStaticDefaults(a, Origin{FileSource, "/etc/m/web.yaml"}, "Node-1"); err != nil {
		t.Fatal(err)
	}
	_ = ApplyStaticDefaults(b, Origin{FileSource, "/etc/m/web.yaml"}, "Node-1")
	if a.UID == "" || a.UID != b.UID {
		t.Errorf("UID not deterministic: %q vs %q", a.UID, b.UID)
	}
	if a.Name != "web-node-1" || a.Namespace != "default" || a.Spec.NodeName != "Node-1" {
		t.Errorf("identity: name %q ns %q node %q", a.Name, a.Namespace, a.Spec.NodeName)
	}
	if a.Annotations[ConfigHashAnnotationKey] != string(a.UID) || a.Annotations[ConfigSourceAnnotationKey] != "file" {
		t.Errorf("annotations: %v", a.Annotations)
	}
	if len(a.Spec.Tolerations) != 1 || a.Spec.Tolerations[0].Effect != v1.TaintEffectNoExecute || a.Spec.Tolerations[0].Operator != v1.TolerationOpExists {
		t.Errorf("tolerations: %v", a.Spec.Tolerations)
	}
	// Content, file and node all feed the UID.
	for name, mutate := range map[string]func() (*v1.Pod, string, string){
		"content": func() (*v1.Pod, string, string) {
			p := mk()
			p.Spec.Containers[0].Image = "busybox:1.37"
			return p, "/etc/m/web.yaml", "Node-1"
		},
		"file": func() (*v1.Pod, string, string) { return mk(), "/etc/m/other.yaml", "Node-1" },
		"node": func() (*v1.Pod, string, string) { return mk(), "/etc/m/web.yaml", "node-2" },
	} {
		p, path, node := mutate()
		_ = ApplyStaticDefaults(p, Origin{FileSource, path}, node)
		if p.UID == a.UID {
			t.Errorf("changing the %s kept the UID", name)
		}
	}
	// A UID in the manifest is kept.
	c := mk()
	c.UID = "given"
	_ = ApplyStaticDefaults(c, Origin{FileSource, "/x"}, "n")
	if c.UID != "given" {
		t.Errorf("manifest UID replaced: %q", c.UID)
	}
}

// TestApplyStaticDefaultsFromURL: as upstream's URL source, a pod read from
// the manifest URL is annotated "http", its UID hashes the URL and not the
// node, and it gets no NoExecute toleration; a pod of another source is
// refused.
func TestApplyStaticDefaultsFromURL(t *testing.T) {
	mk := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metaName("web"), Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
	}
	url := Origin{HTTPSource, "http://127.0.0.1:8080/pods"}
	a, b, other, file := mk(), mk(), mk(), mk()
	if err := ApplyStaticDefaults(a, url, "node-1"); err != nil {
		t.Fatal(err)
	}
	_ = ApplyStaticDefaults(b, url, "node-2")
	_ = ApplyStaticDefaults(other, Origin{HTTPSource, "http://127.0.0.1:8080/other"}, "node-1")
	_ = ApplyStaticDefaults(file, Origin{FileSource, url.Location}, "node-1")
	if a.UID != b.UID {
		t.Errorf("the node fed a URL pod's UID: %q vs %q", a.UID, b.UID)
	}
	if a.UID == other.UID || a.UID == file.UID {
		t.Errorf("the URL or the source did not feed the UID")
	}
	if a.Name != "web-node-1" || a.Annotations[ConfigSourceAnnotationKey] != "http" || a.Annotations[ConfigHashAnnotationKey] != string(a.UID) {
		t.Errorf("name %q, annotations %v", a.Name, a.Annotations)
	}
	if len(a.Spec.Tolerations) != 0 {
		t.Errorf("a URL pod got tolerations: %v", a.Spec.Tolerations)
	}
	if !IsStatic(a) || !IsStatic(file) || !IsCritical(a) {
		t.Errorf("URL and file pods are static and critical pods")
	}
	if err := ApplyStaticDefaults(mk(), Origin{APIServerSource, "x"}, "n"); err == nil {
		t.Errorf("an api pod was given static defaults")
	}
}

func TestValidate(t *testing.T) {
	valid := func() *v1.Pod {
		p := &v1.Pod{ObjectMeta: metaName("ok"), Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
		p.Namespace = "default"
		SetDefaults(p)
		return p
	}
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"valid", func(*v1.Pod) {}, ""},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required value"},
		{"bad name", func(p *v1.Pod) { p.Name = "Bad_Name" }, "metadata.name: Invalid value"},
		{"no image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "" }, "spec.containers[0].image: Required value"},
		{"duplicate container", func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0]) }, "spec.containers[1].name: Duplicate value"},
		{"bad restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy: Unsupported value"},
		{"bad port", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000, Protocol: "TCP"}}
		}, "containerPort: Invalid value"},
		{"mount of a missing volume", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}}
		}, "volumeMounts[0].name: Not found"},
		{"negative grace", func(p *v1.Pod) { g := int64(-1); p.Spec.TerminationGracePeriodSeconds = &g }, "terminationGracePeriodSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.mutate(p)
			err := ValidationError(Validate(p))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
