package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResourceFieldValue(t *testing.T) {
	q := resource.MustParse
	pod := &v1.Pod{}
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("64Mi"), v1.ResourceEphemeralStorage: q("1Gi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: q("128Mi"), v1.ResourceCPU: q("0")},
	}}}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: q("1500m")},
	}}}
	alloc := v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi"), v1.ResourceEphemeralStorage: q("10Gi")}
	for _, tc := range []struct {
		container, res, divisor, want string
	}{
		{"c", "requests.cpu", "", "1"}, // 0.25 rounded up
		{"c", "requests.cpu", "1m", "250"},
		{"c", "limits.cpu", "1m", "2000"}, // 0: the node's allocatable
		{"c", "limits.cpu", "", "2"},
		{"c", "requests.memory", "", "67108864"},
		{"c", "requests.memory", "1Mi", "64"},
		{"c", "limits.memory", "1Mi", "128"},
		{"c", "limits.memory", "1G", "1"}, // 0.134 rounded up
		{"c", "requests.ephemeral-storage", "1Mi", "1024"},
		{"c", "limits.ephemeral-storage", "1Gi", "10"},
		{"init", "limits.cpu", "1m", "1500"},
		{"init", "requests.cpu", "1m", "0"},
	} {
		ref := &v1.ResourceFieldSelector{ContainerName: tc.container, Resource: tc.res}
		if tc.divisor != "" {
			ref.Divisor = q(tc.divisor)
		}
		got, err := ResourceFieldValue(pod, ref, alloc)
		if err != nil || got != tc.want {
			t.Errorf("%s %s / %q = %q %v, want %q", tc.container, tc.res, tc.divisor, got, err, tc.want)
		}
	}
	// Pod-level limits come before the node's allocatable.
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("500m")}}
	if got, _ := ResourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu", Divisor: q("1m")}, alloc); got != "500" {
		t.Errorf("limits.cpu with a pod-level limit = %q, want 500", got)
	}
	for _, ref := range []v1.ResourceFieldSelector{
		{ContainerName: "nope", Resource: "limits.cpu"},
		{ContainerName: "c", Resource: "limits.gpu"},
		{ContainerName: "c", Resource: "cpu"},
	} {
		if v, err := ResourceFieldValue(pod, &ref, alloc); err == nil {
			t.Errorf("%+v accepted: %q", ref, v)
		}
	}
}

func TestReadOnlyVolume(t *testing.T) {
	for _, tc := range []struct {
		v    v1.VolumeSource
		want bool
	}{
		{v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}, true},
		{v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}, true},
		{v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}, true},
		{v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}, true},
		{v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}, false},
		{v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}, false},
	} {
		if got := ReadOnlyVolume(&v1.Volume{VolumeSource: tc.v}); got != tc.want {
			t.Errorf("%+v: %v", tc.v, got)
		}
	}
}
