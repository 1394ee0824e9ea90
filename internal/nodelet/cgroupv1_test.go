package nodelet

import (
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/machine"
)

// failCgroupV1 as upstream: unset or true refuses cgroup v1 with upstream's
// message; false, or cgroup v2, starts.
func TestCheckCgroupV1(t *testing.T) {
	for _, tt := range []struct {
		name   string
		v2     bool
		fail   *bool
		refuse bool
	}{
		{name: "v1, unset (default true)", refuse: true},
		{name: "v1, true", fail: ptr.To(true), refuse: true},
		{name: "v1, false", fail: ptr.To(false)},
		{name: "v2, unset", v2: true},
		{name: "v2, true", v2: true, fail: ptr.To(true)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &kubeletv1beta1.KubeletConfiguration{FailCgroupV1: tt.fail}
			err := checkCgroupV1(cfg, machine.Facts{Cgroups: machine.Cgroups{V2: tt.v2}})
			if (err != nil) != tt.refuse {
				t.Fatalf("checkCgroupV1 = %v, want refusal %v", err, tt.refuse)
			}
			if err != nil && (!strings.Contains(err.Error(), "kubelet is configured to not run on a host using cgroup v1") || !strings.Contains(err.Error(), "failCgroupV1")) {
				t.Errorf("the refusal does not give upstream's message and name the setting: %v", err)
			}
		})
	}
}
