package cgroups

import (
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/machine"
)

// FromKubelet is the Config the KubeletConfiguration asks for:
// cgroupDriver, cgroupRoot, cgroupsPerQOS, the reservations and
// enforceNodeAllocatable, cpuCFSQuota, cpuCFSQuotaPeriod, podPidsLimit and
// memorySwap.swapBehavior and kubeletCgroups,
// on the machine m; event is Config.Event.
func FromKubelet(kc *kubeletv1beta1.KubeletConfiguration, m machine.Facts, event func(eventType, reason, message string)) Config {
	c := Config{
		Driver:                 kc.CgroupDriver,
		CgroupRoot:             kc.CgroupRoot,
		CgroupsPerQOS:          kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS,
		Machine:                m,
		KubeReserved:           kc.KubeReserved,
		SystemReserved:         kc.SystemReserved,
		EnforceNodeAllocatable: kc.EnforceNodeAllocatable,
		KubeReservedCgroup:     kc.KubeReservedCgroup,
		SystemReservedCgroup:   kc.SystemReservedCgroup,
		Event:                  event,
		DisableCPUCFSQuota:     kc.CPUCFSQuota != nil && !*kc.CPUCFSQuota,
		SwapBehavior:           kc.MemorySwap.SwapBehavior,
		KubeletCgroups:         kc.KubeletCgroups,
	}
	if kc.CPUCFSQuotaPeriod != nil {
		c.CPUCFSQuotaPeriod = kc.CPUCFSQuotaPeriod.Duration
	}
	if kc.PodPidsLimit != nil {
		c.PodPidsLimit = *kc.PodPidsLimit
	}
	return c
}
