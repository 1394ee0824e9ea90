package volumes

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTmpfsOptions(t *testing.T) {
	for _, tt := range []struct {
		opts   string
		noswap bool
		want   string
	}{
		{"", false, ""},
		{"", true, "noswap"},
		{"size=1048576", false, "size=1048576"},
		{"size=1048576", true, "size=1048576,noswap"},
		{"mode=0755", true, "mode=0755,noswap"},
	} {
		if got := tmpfsOptions(tt.opts, tt.noswap); got != tt.want {
			t.Errorf("tmpfsOptions(%q, %v) = %q, want %q", tt.opts, tt.noswap, got, tt.want)
		}
	}
}

func TestMemoryMediumSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	pod := func(limits ...string) *v1.Pod {
		p := &v1.Pod{}
		for _, l := range limits {
			c := v1.Container{Name: "c"}
			if l != "" {
				c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(l)}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
		return p
	}
	for _, tt := range []struct {
		name        string
		allocatable *resource.Quantity
		pod         *v1.Pod
		sizeLimit   *resource.Quantity
		want        int64
	}{
		{"no limit anywhere: allocatable", q("4Gi"), pod(""), nil, 4 << 30},
		{"huge sizeLimit, no pod limit: allocatable", q("4Gi"), pod(""), q("1Ti"), 4 << 30},
		{"huge sizeLimit: the pod's limit", q("4Gi"), pod("64Mi"), q("1Ti"), 64 << 20},
		{"pod limit summed over containers", q("4Gi"), pod("64Mi", "32Mi"), nil, 96 << 20},
		{"one container without a limit: no pod limit", q("4Gi"), pod("64Mi", ""), q("1Ti"), 4 << 30},
		{"small sizeLimit wins", q("4Gi"), pod("64Mi"), q("16Mi"), 16 << 20},
		{"pod limit above allocatable: allocatable", q("1Gi"), pod("2Gi"), nil, 1 << 30},
		{"zero sizeLimit ignored", q("4Gi"), pod("64Mi"), q("0"), 64 << 20},
		{"no allocatable known: sizeLimit", nil, pod(""), q("1Gi"), 1 << 30},
		{"nothing known: kernel default", nil, pod(""), nil, 0},
	} {
		if got := memoryMediumSize(tt.allocatable, tt.pod, tt.sizeLimit); got != tt.want {
			t.Errorf("%s: memoryMediumSize = %d, want %d", tt.name, got, tt.want)
		}
	}
}
