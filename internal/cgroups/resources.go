package cgroups

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// CFS and shares constants, as upstream (pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	MilliCPUToCPU = 1000
	// QuotaPeriod is the default CFS period: 100 ms in µs.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest quota: 1 ms in µs.
	MinQuotaPeriod = 1000
	// MinMilliCPULimit is the smallest CPU limit a quota enforces
	// (MinQuotaPeriod over the default period).
	MinMilliCPULimit = 10
)

// OOM score adjustments, as upstream (pkg/kubelet/qos/policy.go).
const (
	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000
)

// ResourceOptions are the node facts and kubelet settings container
// resources depend on. The zero value is upstream's defaults on a node
// of unknown memory.
type ResourceOptions struct {
	// MemoryCapacity is the node's memory in bytes: the denominator of the
	// Burstable oom_score_adj heuristic and of LimitedSwap's share. 0 or
	// less: Burstable containers get 999 (as if they requested nothing)
	// and no swap.
	MemoryCapacity int64
	// DisableCPUCFSQuota is cpuCFSQuota: false (no quota and period given).
	DisableCPUCFSQuota bool
	// CPUCFSQuotaPeriod is cpuCFSQuotaPeriod; 0 means 100 ms.
	CPUCFSQuotaPeriod time.Duration
	// HugePageSizes are the machine's huge page sizes in the runtime's
	// spelling ("2MB", "1GB"). As upstream, each gets a limit: 0 unless the
	// container's limits (or the pod-level ones) ask for some.
	HugePageSizes []string
	// CgroupV2 is the unified hierarchy: containers then get
	// memory.oom.group=1 (singleProcessOOMKill defaults to false on v2) and
	// memory.high=max (MemoryQoS off), as upstream.
	CgroupV2 bool
	// SwapBehavior is memorySwap.swapBehavior: "" and NoSwap give no swap,
	// LimitedSwap some to Burstable containers (cgroup v2 only).
	SwapBehavior string
	// SwapControllerAvailable is the swap controller available
	// (machine.Swap): without it no swap setting is given, as upstream.
	SwapControllerAvailable bool
	// SwapCapacity is the machine's swap in bytes, shared by LimitedSwap
	// in proportion to the containers' memory requests.
	SwapCapacity int64
}

// The swap behaviours of memorySwap.swapBehavior.
const (
	NoSwap      = "NoSwap"
	LimitedSwap = "LimitedSwap"
)

// periodMicros is the CFS period in µs.
func (o ResourceOptions) periodMicros() int64 {
	if o.CPUCFSQuotaPeriod <= 0 {
		return QuotaPeriod
	}
	return int64(o.CPUCFSQuotaPeriod / time.Microsecond)
}

// MilliCPUToShares converts milli-CPUs to cpu.shares: 0 gives MinShares,
// the result is clamped to [MinShares, MaxShares].
func MilliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / MilliCPUToCPU
	return min(max(shares, MinShares), MaxShares)
}

// SharesToMilliCPU converts cpu.shares back to milli-CPUs (rounded up), 0
// below MinShares, as upstream.
func SharesToMilliCPU(shares int64) int64 {
	if shares < MinShares {
		return 0
	}
	return (shares*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU
}

// QuotaToMilliCPU converts a CFS quota over period (µs) to milli-CPUs, 0
// for no quota (-1), as upstream.
func QuotaToMilliCPU(quota, period int64) int64 {
	if quota == -1 || period <= 0 {
		return 0
	}
	return quota * MilliCPUToCPU / period
}

// MilliCPUToQuota converts milli-CPUs to a CFS quota over period (µs): 0
// for no limit, at least MinQuotaPeriod otherwise.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/MilliCPUToCPU, MinQuotaPeriod)
}

// ContainerResources is the CRI linux resources of container c of pod, as
// upstream's generateLinuxContainerResources computes them: cpu shares from
// the cpu request (from the limit when only a limit is given; at least 2),
// CFS quota and period from the cpu limit (period always set, quota 0
// without a limit, unless cpuCFSQuota is off), the memory limit, hugepage
// limits, the oom_score_adj of the pod's QoS class and the swap of
// memorySwap.swapBehavior (configureSwap). With pod-level resources, a
// container without its own cpu or memory limit gets the pod's.
func ContainerResources(pod *v1.Pod, c *v1.Container, opts ResourceOptions) *runtimeapi.LinuxContainerResources {
	podLevel := resourcehelper.IsPodLevelResourcesSet(pod)
	cpuLimit := c.Resources.Limits.Cpu()
	memLimit := c.Resources.Limits.Memory()
	if podLevel {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := &runtimeapi.LinuxContainerResources{}
	if req, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		r.CpuShares = MilliCPUToShares(req.MilliValue())
	} else {
		r.CpuShares = MilliCPUToShares(cpuLimit.MilliValue())
	}
	if v := memLimit.Value(); v != 0 {
		r.MemoryLimitInBytes = v
	}
	if !opts.DisableCPUCFSQuota {
		r.CpuPeriod = opts.periodMicros()
		r.CpuQuota = MilliCPUToQuota(cpuLimit.MilliValue(), r.CpuPeriod)
	}
	r.OomScoreAdj = int64(OOMScoreAdj(pod, c, opts.MemoryCapacity))
	r.HugepageLimits = hugepageLimits(pod, c, opts.HugePageSizes)
	if opts.CgroupV2 {
		r.Unified = map[string]string{"memory.oom.group": "1", "memory.high": "max"}
	}
	configureSwap(r, pod, c, opts)
	return r
}

// SwapBehavior is the swap behaviour container c of pod gets, as upstream's
// GetContainerSwapBehavior: LimitedSwap only when configured, on cgroup v2
// with the swap controller, for a pod that is not critical (static, mirror
// or system-critical priority) and is Burstable, and a container that asks
// for memory with a request different from its limit; NoSwap otherwise
// ("" included).
func SwapBehavior(pod *v1.Pod, c *v1.Container, opts ResourceOptions) string {
	if opts.SwapBehavior != LimitedSwap || !opts.SwapControllerAvailable || !opts.CgroupV2 {
		return NoSwap
	}
	if podspec.IsCritical(pod) {
		return NoSwap
	}
	req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	noMemory := req.IsZero() && lim.IsZero()
	if podspec.QOSClass(pod) != v1.PodQOSBurstable || noMemory || req.Cmp(*lim) == 0 {
		return NoSwap
	}
	return LimitedSwap
}

// LimitedSwapBytes is the swap a LimitedSwap container gets, as upstream's
// calcSwapForBurstablePods: its memory request's share of the node's
// memory, of the node's swap. An error (no node memory, a request larger
// than it) is upstream's, which then gives the container no swap.
func LimitedSwapBytes(memoryRequest, nodeMemory, swapCapacity int64) (int64, error) {
	if nodeMemory <= 0 {
		return 0, errors.New("total node memory is 0")
	}
	if memoryRequest > nodeMemory {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", memoryRequest, nodeMemory)
	}
	return int64(float64(memoryRequest) / float64(nodeMemory) * float64(swapCapacity)), nil
}

// configureSwap sets the container's swap as upstream's
// configureContainerSwapResources: nothing without the swap controller;
// NoSwap is memory.swap.max 0 on v2 and the memory+swap limit equal to
// the memory limit on v1 (0, no limit, without a memory limit);
// LimitedSwap is memory.swap.max LimitedSwapBytes (NoSwap when that
// fails).
func configureSwap(r *runtimeapi.LinuxContainerResources, pod *v1.Pod, c *v1.Container, opts ResourceOptions) {
	if !opts.SwapControllerAvailable {
		return
	}
	if !opts.CgroupV2 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	swap := int64(0)
	if SwapBehavior(pod, c, opts) == LimitedSwap {
		if v, err := LimitedSwapBytes(c.Resources.Requests.Memory().Value(), opts.MemoryCapacity, opts.SwapCapacity); err == nil {
			swap = v
		}
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified["memory.swap.max"] = strconv.FormatInt(swap, 10)
}

// OOMScoreAdj is the oom_score_adj of container c, as upstream's
// GetContainerOOMScoreAdjust: -997 for Guaranteed pods and node-critical
// ones (priorityClassName system-node-critical), 1000 for BestEffort, and
// for Burstable 1000 - 1000*memoryRequest/memoryCapacity clamped to
// [3, 999] (above any Guaranteed container, below BestEffort). A sidecar
// (restartable init container) gets at most the score of the pod's
// smallest regular container.
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int {
	if pod.Spec.PriorityClassName == "system-node-critical" {
		return GuaranteedOOMScoreAdj
	}
	switch podspec.QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	remaining := int64(0)
	if resourcehelper.IsPodLevelRequestsSet(pod) {
		remaining = remainingPodMemoryPerContainer(pod)
	}
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+remaining)/memoryCapacity
	if isSidecar(pod, c) {
		minReq := minRegularContainerMemory(pod) + remaining
		if floor := 1000 - 1000*minReq/memoryCapacity; adj > floor {
			adj = floor
		}
	}
	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj == BestEffortOOMScoreAdj {
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularContainerMemory is the smallest memory request of the pod's
// regular containers (0 when there are none).
func minRegularContainerMemory(pod *v1.Pod) int64 {
	var m int64
	for i, c := range pod.Spec.Containers {
		v := c.Resources.Requests.Memory().Value()
		if i == 0 || v < m {
			m = v
		}
	}
	return m
}

// remainingPodMemoryPerContainer is the pod-level memory request not
// claimed by the containers, split evenly over the regular containers and
// sidecars (upstream's remainingPodMemReqPerContainer).
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	podReq := pod.Spec.Resources.Requests.Memory().Value()
	var sum, n int64
	for _, c := range pod.Spec.Containers {
		sum += c.Resources.Requests.Memory().Value()
		n++
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(pod, c) {
			sum += c.Resources.Requests.Memory().Value()
			n++
		}
	}
	if n == 0 || podReq <= sum {
		return 0
	}
	return (podReq - sum) / n
}

// hugepageLimits lists a limit per machine page size, as upstream: 0 unless
// the pod-level or (taking precedence) the container's hugepages-<size>
// limits say otherwise. Sizes the machine lacks are left out.
func hugepageLimits(pod *v1.Pod, c *v1.Container, sizes []string) []*runtimeapi.HugepageLimit {
	want := map[string]uint64{}
	add := func(list v1.ResourceList) {
		for name, q := range list {
			if size, ok := HugePageSize(name); ok {
				want[size] = uint64(q.Value())
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		add(pod.Spec.Resources.Limits)
	}
	add(c.Resources.Limits)
	var out []*runtimeapi.HugepageLimit
	for _, size := range sizes {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: size, Limit: want[size]})
	}
	return out
}

// HugePageSize is the runtime's spelling ("2MB", "1GB") of the page size of
// a hugepages-<size> resource name.
func HugePageSize(name v1.ResourceName) (string, bool) {
	b, ok := hugePageBytes(name)
	if !ok {
		return "", false
	}
	return byteSizeUnit(b), true
}

// hugePageBytes is the page size in bytes of a hugepages-<size> resource.
func hugePageBytes(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, false
	}
	return q.Value(), true
}

// byteSizeUnit writes a size in the largest binary unit dividing it:
// 2097152 is "2MB", 1073741824 "1GB" (runc's and upstream's spelling).
func byteSizeUnit(size int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	return strconv.FormatInt(size, 10) + units[i]
}
