package cgroups

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func metavUID(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID(uid)}
}

func hp(kv ...any) []*runtimeapi.HugepageLimit {
	var out []*runtimeapi.HugepageLimit
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: kv[i].(string), Limit: uint64(kv[i+1].(int))})
	}
	return out
}

func TestContainerResources(t *testing.T) {
	opts := ResourceOptions{MemoryCapacity: 4 * gi, HugePageSizes: []string{"2MB", "1GB"}}
	zeroHP := hp("2MB", 0, "1GB", 0)
	always := v1.ContainerRestartPolicyAlways
	sidecarPod := podOf("s", ctr("app", rl("memory", "2Gi"), nil))
	sidecarPod.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always}}
	critical := burstablePod("c")
	critical.Spec.PriorityClassName = "system-node-critical"
	podLevel := podOf("pl", ctr("c", nil, nil))
	podLevel.Spec.Resources = &v1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "256Mi")}

	tests := []struct {
		name string
		pod  *v1.Pod
		c    *v1.Container // nil: the first container
		opts *ResourceOptions
		want *runtimeapi.LinuxContainerResources
	}{{
		name: "guaranteed",
		pod:  guaranteedPod("g"),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 204, CpuPeriod: 100000, CpuQuota: 20000, MemoryLimitInBytes: 64 * mi, OomScoreAdj: -997, HugepageLimits: zeroHP},
	}, {
		name: "besteffort",
		pod:  bestEffortPod("e"),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000, HugepageLimits: zeroHP},
	}, {
		name: "burstable requesting a quarter of the memory",
		pod:  podOf("b", ctr("c", rl("cpu", "100m", "memory", "1Gi"), nil)),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, OomScoreAdj: 750, HugepageLimits: zeroHP},
	}, {
		name: "cpu limit only: shares from the limit",
		pod:  podOf("l", ctr("c", nil, rl("cpu", "500m"))),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, OomScoreAdj: 999, HugepageLimits: zeroHP},
	}, {
		name: "minimums: 2 shares, 1 ms quota",
		pod:  podOf("m", ctr("c", rl("cpu", "1m"), rl("cpu", "5m"))),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, OomScoreAdj: 999, HugepageLimits: zeroHP},
	}, {
		name: "maximum shares",
		pod:  podOf("x", ctr("c", rl("cpu", "300"), nil)),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 262144, CpuPeriod: 100000, OomScoreAdj: 999, HugepageLimits: zeroHP},
	}, {
		name: "burstable requesting all the memory: 3",
		pod:  podOf("a", ctr("c", rl("memory", "4Gi"), nil)),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 3, HugepageLimits: zeroHP},
	}, {
		name: "node critical",
		pod:  critical,
		want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, OomScoreAdj: -997, HugepageLimits: zeroHP},
	}, {
		name: "hugepages, a size the machine lacks dropped",
		pod:  podOf("h", ctr("c", rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi"), rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "4Mi", "hugepages-16Gi", "16Gi"))),
		want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: gi, OomScoreAdj: -997, HugepageLimits: hp("2MB", 4*int(mi), "1GB", 0)},
	}, {
		name: "cpuCFSQuota false",
		pod:  guaranteedPod("q"),
		opts: &ResourceOptions{MemoryCapacity: 4 * gi, DisableCPUCFSQuota: true},
		want: &runtimeapi.LinuxContainerResources{CpuShares: 204, MemoryLimitInBytes: 64 * mi, OomScoreAdj: -997},
	}, {
		name: "cpuCFSQuotaPeriod 50ms",
		pod:  guaranteedPod("q"),
		opts: &ResourceOptions{MemoryCapacity: 4 * gi, CPUCFSQuotaPeriod: 50 * time.Millisecond},
		want: &runtimeapi.LinuxContainerResources{CpuShares: 204, CpuPeriod: 50000, CpuQuota: 10000, MemoryLimitInBytes: 64 * mi, OomScoreAdj: -997},
	}, {
		name: "cgroup v2",
		pod:  bestEffortPod("v"),
		opts: &ResourceOptions{MemoryCapacity: 4 * gi, CgroupV2: true},
		want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000,
			Unified: map[string]string{"memory.oom.group": "1", "memory.high": "max"}},
	}, {
		name: "sidecar no likelier to be killed than the app",
		pod:  sidecarPod,
		c:    &sidecarPod.Spec.InitContainers[0],
		want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 500, HugepageLimits: zeroHP},
	}, {
		name: "pod-level limits for a container without its own",
		pod:  podLevel,
		// Guaranteed by its pod-level limits (requests default to them).
		want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: 100000, MemoryLimitInBytes: 256 * mi, OomScoreAdj: -997, HugepageLimits: zeroHP},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			c := tt.c
			if c == nil {
				c = &tt.pod.Spec.Containers[0]
			}
			got := ContainerResources(tt.pod, c, o)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestOOMScoreAdjUnknownCapacity(t *testing.T) {
	p := burstablePod("b")
	if got := OOMScoreAdj(p, &p.Spec.Containers[0], 0); got != 999 {
		t.Errorf("OOMScoreAdj with no capacity = %d, want 999", got)
	}
}

func TestConversions(t *testing.T) {
	for _, tt := range []struct{ milli, shares int64 }{{0, 2}, {1, 2}, {100, 102}, {1000, 1024}, {300000, 262144}} {
		if got := MilliCPUToShares(tt.milli); got != tt.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.shares)
		}
	}
	for _, tt := range []struct{ milli, period, quota int64 }{{0, 100000, 0}, {5, 100000, 1000}, {200, 100000, 20000}, {1500, 50000, 75000}} {
		if got := MilliCPUToQuota(tt.milli, tt.period); got != tt.quota {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.quota)
		}
	}
	for _, tt := range []struct{ shares, weight int64 }{{2, 1}, {1024, 39}, {262144, 10000}, {1, 1}} {
		if got := CPUSharesToWeight(tt.shares); got != tt.weight {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", tt.shares, got, tt.weight)
		}
	}
	for name, want := range map[v1.ResourceName]string{"hugepages-2Mi": "2MB", "hugepages-1Gi": "1GB", "hugepages-64Ki": "64KB"} {
		if got, ok := HugePageSize(name); !ok || got != want {
			t.Errorf("HugePageSize(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
	if _, ok := HugePageSize("memory"); ok {
		t.Error("HugePageSize(memory) ok")
	}
}
