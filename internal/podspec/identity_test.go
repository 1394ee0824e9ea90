package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The values are upstream v1.37.2's kubecontainer.HashContainer, printed
// by a program built against k8s.io/kubernetes (strconv.FormatUint(h, 16),
// the container hash annotation's spelling).
func TestContainerHashIsUpstreams(t *testing.T) {
	for _, tc := range []struct {
		c    v1.Container
		want string
	}{
		{v1.Container{Name: "app", Image: "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"}, "2f35d113"},
		{v1.Container{Name: "c1", Image: "nginx"}, "10bd8e80"},
	} {
		if got := ContainerHash(&tc.c); got != tc.want {
			t.Errorf("ContainerHash(%s, %s) = %s, want upstream's %s", tc.c.Name, tc.c.Image, got, tc.want)
		}
	}
}

func TestContainerChanged(t *testing.T) {
	c := v1.Container{Name: "c1", Image: "nginx", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}
	resized := *c.DeepCopy()
	resized.Resources.Limits[v1.ResourceCPU] = resource.MustParse("200m")
	newImage := *c.DeepCopy()
	newImage.Image = "nginx:2"
	for _, tc := range []struct {
		name string
		hash string
		spec *v1.Container
		want bool
	}{
		{"no hash", "", &c, false},
		{"same", ContainerHash(&c), &c, false},
		{"resized: same hash", ContainerHash(&c), &resized, false},
		{"image changed", ContainerHash(&c), &newImage, true},
		{"legacy hash, same spec", LegacyContainerHash(&c), &c, false},
		{"legacy hash, resized", LegacyContainerHash(&c), &resized, true},
		{"unknown hash", "deadbeef", &c, true},
	} {
		if got := ContainerChanged(tc.hash, tc.spec); got != tc.want {
			t.Errorf("%s: ContainerChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
