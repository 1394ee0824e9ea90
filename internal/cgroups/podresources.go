package cgroups

import (
	"math"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/internal/podspec"
)

// ResourceConfig is what a pod, QoS or node cgroup is limited to; nil
// fields are left as they are (the kernel's default on a new cgroup).
type ResourceConfig struct {
	// CPUShares is cpu.shares (v1), converted to cpu.weight on v2.
	CPUShares *int64
	// CPUQuota is the CFS quota in µs; -1 is no limit.
	CPUQuota *int64
	// CPUPeriod is the CFS period in µs.
	CPUPeriod *int64
	// Memory is the memory limit in bytes.
	Memory *int64
	// PidsLimit is pids.max; -1 is no limit.
	PidsLimit *int64
	// HugePageLimit maps a page size in bytes to a limit in bytes; the
	// machine's page sizes missing here are limited to 0 (see
	// Manager.apply), math.MaxInt64 is no limit.
	HugePageLimit map[int64]int64
}

// ResourceConfigForPod is the pod-level cgroup configuration, as upstream's
// ResourceConfigForPod: the pod's requests and limits (containers, init
// containers and sidecars combined as the scheduler does, pod overhead
// added, pod-level resources honoured) turned into cpu shares and, by QoS
// class, CFS quota and memory limit:
//
//   - Guaranteed: shares, quota and period, memory limit;
//   - Burstable: shares; quota and period only when every container has a
//     cpu limit, the memory limit only when every container has one;
//   - BestEffort: 2 shares.
//
// Hugepage limits follow the pod's hugepages requests. enforceCPULimits
// false (cpuCFSQuota: false) sets the quota to -1; cpuPeriod is in µs.
func ResourceConfigForPod(pod *v1.Pod, enforceCPULimits bool, cpuPeriod int64) *ResourceConfig {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuLimitsDeclared, memoryLimitsDeclared := true, true
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Resources.Limits.Cpu().IsZero() {
				cpuLimitsDeclared = false
			}
			if c.Resources.Limits.Memory().IsZero() {
				memoryLimitsDeclared = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimitsDeclared = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memoryLimitsDeclared = true
		}
	}
	var cpuRequests, cpuLimits, memoryLimits int64
	if q, ok := reqs[v1.ResourceCPU]; ok {
		cpuRequests = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceCPU]; ok {
		cpuLimits = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceMemory]; ok {
		memoryLimits = q.Value()
	}
	shares := MilliCPUToShares(cpuRequests)
	quota := MilliCPUToQuota(cpuLimits, cpuPeriod)
	if !enforceCPULimits {
		quota = -1
	}
	period := cpuPeriod
	rc := &ResourceConfig{}
	switch podspec.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memoryLimits
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuLimitsDeclared {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memoryLimitsDeclared {
			rc.Memory = &memoryLimits
		}
	default:
		minShares := int64(MinShares)
		rc.CPUShares = &minShares
	}
	rc.HugePageLimit = HugePageLimits(reqs)
	return rc
}

// HugePageLimits maps the page sizes (bytes) of the hugepages-<size>
// resources in list to their amounts (bytes).
func HugePageLimits(list v1.ResourceList) map[int64]int64 {
	out := map[int64]int64{}
	for name, q := range list {
		size, ok := hugePageBytes(name)
		if ok {
			out[size] += q.Value()
		}
	}
	return out
}

// unboundedHugePages is the QoS cgroups' hugetlb configuration: no limit
// for any page size.
func unboundedHugePages(sizes []int64) map[int64]int64 {
	out := map[int64]int64{}
	for _, s := range sizes {
		out[s] = math.MaxInt64
	}
	return out
}

// CPUSharesToWeight converts cpu.shares to cgroup v2 cpu.weight as
// upstream's cgroup manager does: [2, 262144] onto [1, 10000].
func CPUSharesToWeight(shares int64) int64 {
	if shares >= MaxShares {
		return 10000
	}
	if shares < MinShares {
		shares = MinShares
	}
	return 1 + (shares-2)*9999/262142
}
