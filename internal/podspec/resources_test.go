package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQOSClass(t *testing.T) {
	q := resource.MustParse
	mk := func(req, lim v1.ResourceList) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	both := v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}
	for name, tt := range map[string]struct {
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		"none":        {mk(nil, nil), v1.PodQOSBestEffort},
		"equal":       {mk(both, both), v1.PodQOSGuaranteed},
		"limits":      {mk(nil, both), v1.PodQOSGuaranteed},
		"requests":    {mk(both, nil), v1.PodQOSBurstable},
		"cpu only":    {mk(v1.ResourceList{v1.ResourceCPU: q("1")}, v1.ResourceList{v1.ResourceCPU: q("1")}), v1.PodQOSBurstable},
		"req < lim":   {mk(v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi")}, both), v1.PodQOSBurstable},
		"zero limits": {mk(nil, v1.ResourceList{v1.ResourceCPU: q("0"), v1.ResourceMemory: q("0")}), v1.PodQOSBestEffort},
		// Pod-level resources (PodLevelResources, beta and on) decide when
		// they set cpu or memory, whatever the containers say.
		"pod-level limits":                 {withPodLevel(mk(nil, nil), nil, both), v1.PodQOSGuaranteed},
		"pod-level requests":               {withPodLevel(mk(both, both), both, nil), v1.PodQOSBurstable},
		"pod-level below limits":           {withPodLevel(mk(nil, nil), v1.ResourceList{v1.ResourceMemory: q("512Mi")}, both), v1.PodQOSBurstable},
		"pod-level huge pages only":        {withPodLevel(mk(nil, nil), v1.ResourceList{"hugepages-2Mi": q("2Mi")}, v1.ResourceList{"hugepages-2Mi": q("2Mi")}), v1.PodQOSBestEffort},
		"pod-level, another resource only": {withPodLevel(mk(both, both), v1.ResourceList{"example.com/gpu": q("1")}, nil), v1.PodQOSGuaranteed},
		"guaranteed and best-effort containers": {&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Resources: v1.ResourceRequirements{Requests: both, Limits: both}}, {Name: "b"}}}}, v1.PodQOSBurstable},
		"guaranteed init container, best-effort app": {&v1.Pod{Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: both}}}, Containers: []v1.Container{{Name: "a"}}}}, v1.PodQOSBurstable},
	} {
		if got := QOSClass(tt.pod); got != tt.want {
			t.Errorf("%s: %s, want %s", name, got, tt.want)
		}
	}
}

// withPodLevel sets pod-level requests and limits.
func withPodLevel(p *v1.Pod, req, lim v1.ResourceList) *v1.Pod {
	p.Spec.Resources = &v1.ResourceRequirements{Requests: req, Limits: lim}
	return p
}

func TestContainerNames(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	p.UID = "u"
	got := ContainerNames([]*v1.Pod{p})
	if len(got) != 1 || len(got["u"]) != 3 || !got["u"]["i"] || !got["u"]["b"] {
		t.Errorf("ContainerNames = %v", got)
	}
}
