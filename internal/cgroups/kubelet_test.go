package cgroups

import (
	"testing"
	"time"

	"github.com/nodelet/nodelet/internal/machine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestFromKubelet(t *testing.T) {
	c := FromKubelet(&kubeletv1beta1.KubeletConfiguration{}, machine.Facts{NumCPU: 2}, nil)
	if !c.CgroupsPerQOS || c.DisableCPUCFSQuota || c.CPUCFSQuotaPeriod != 0 || c.PodPidsLimit != 0 {
		t.Errorf("defaults: %+v", c)
	}
	c = FromKubelet(&kubeletv1beta1.KubeletConfiguration{
		CgroupDriver: "systemd", CgroupRoot: "/custom", CgroupsPerQOS: ptr.To(false), CPUCFSQuota: ptr.To(false),
		CPUCFSQuotaPeriod: &metav1.Duration{Duration: 50 * time.Millisecond}, PodPidsLimit: ptr.To[int64](1024),
		KubeReserved: map[string]string{"cpu": "100m"}, SystemReserved: map[string]string{"memory": "1Gi"},
		EnforceNodeAllocatable: []string{"pods", "kube-reserved"}, KubeReservedCgroup: "/kube", SystemReservedCgroup: "/system",
		MemorySwap: kubeletv1beta1.MemorySwapConfiguration{SwapBehavior: LimitedSwap},
	}, machine.Facts{NumCPU: 2}, nil)
	if c.Driver != "systemd" || c.CgroupRoot != "/custom" || c.CgroupsPerQOS || !c.DisableCPUCFSQuota || c.CPUCFSQuotaPeriod != 50*time.Millisecond ||
		c.PodPidsLimit != 1024 || c.KubeReserved["cpu"] != "100m" || c.SystemReserved["memory"] != "1Gi" || len(c.EnforceNodeAllocatable) != 2 ||
		c.KubeReservedCgroup != "/kube" || c.SystemReservedCgroup != "/system" || c.SwapBehavior != LimitedSwap {
		t.Errorf("set: %+v", c)
	}
}
