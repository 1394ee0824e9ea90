package volumes

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPageSizeOption: upstream's getPageSizeMountOption cases.
func TestPageSizeOption(t *testing.T) {
	pod := func(sizes ...string) *v1.Pod {
		p := &v1.Pod{}
		for _, s := range sizes {
			r := v1.ResourceList{v1.ResourceName("hugepages-" + s): resource.MustParse("4" + s)}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: v1.ResourceRequirements{Requests: r, Limits: r}})
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		medium  v1.StorageMedium
		pod     *v1.Pod
		want    string
		wantErr string
	}{
		{name: "HugePages, one size", medium: v1.StorageMediumHugePages, pod: pod("2Mi"), want: "pagesize=2Mi"},
		{name: "HugePages, the same size twice", medium: v1.StorageMediumHugePages, pod: pod("2Mi", "2Mi"), want: "pagesize=2Mi"},
		{name: "HugePages, two sizes", medium: v1.StorageMediumHugePages, pod: pod("2Mi", "1Gi"), wantErr: "can't be used if container requests multiple huge page sizes"},
		{name: "HugePages-1Gi among two sizes", medium: "HugePages-1Gi", pod: pod("2Mi", "1Gi"), want: "pagesize=1Gi"},
		{name: "HugePages-1Gi without such a request", medium: "HugePages-1Gi", pod: pod("2Mi"), wantErr: "hugePages storage requested, but there is no resource request for huge pages"},
		{name: "no huge pages at all", medium: v1.StorageMediumHugePages, pod: pod(), wantErr: "there is no resource request for huge pages"},
		{name: "a bad size", medium: "HugePages-x", pod: pod("2Mi"), wantErr: "unable to parse hugepage size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pageSizeOption(tc.medium, tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("pageSizeOption = %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("pageSizeOption = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
