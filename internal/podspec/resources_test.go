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
		"none":      {mk(nil, nil), v1.PodQOSBestEffort},
		"equal":     {mk(both, both), v1.PodQOSGuaranteed},
		"limits":    {mk(nil, both), v1.PodQOSGuaranteed},
		"requests":  {mk(both, nil), v1.PodQOSBurstable},
		"cpu only":  {mk(v1.ResourceList{v1.ResourceCPU: q("1")}, v1.ResourceList{v1.ResourceCPU: q("1")}), v1.PodQOSBurstable},
		"req < lim": {mk(v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi")}, both), v1.PodQOSBurstable},
	} {
		if got := QOSClass(tt.pod); got != tt.want {
			t.Errorf("%s: %s, want %s", name, got, tt.want)
		}
	}
}
