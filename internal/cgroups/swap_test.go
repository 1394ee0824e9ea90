package cgroups

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// The swap setting of each container, as upstream's
// configureContainerSwapResources and GetContainerSwapBehavior.
func TestContainerSwap(t *testing.T) {
	v2Limited := ResourceOptions{CgroupV2: true, SwapControllerAvailable: true, SwapBehavior: LimitedSwap, MemoryCapacity: 4 * gi, SwapCapacity: gi}
	burstable := podOf("b", ctr("c", rl("memory", "1Gi"), rl("memory", "2Gi")))
	static := podOf("s", ctr("c", rl("memory", "1Gi"), rl("memory", "2Gi")))
	static.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
	mirror := podOf("m", ctr("c", rl("memory", "1Gi"), rl("memory", "2Gi")))
	mirror.Annotations = map[string]string{podspec.ConfigMirrorAnnotationKey: "x"}
	critical := podOf("p", ctr("c", rl("memory", "1Gi"), rl("memory", "2Gi")))
	prio := int32(podspec.SystemCriticalPriority)
	critical.Spec.Priority = &prio
	reqIsLimit := podOf("r", ctr("c", rl("memory", "1Gi", "cpu", "1"), rl("memory", "1Gi")))
	noMemory := podOf("n", ctr("c", rl("cpu", "100m"), nil))
	guaranteed := podOf("g", ctr("c", rl("memory", "1Gi", "cpu", "1"), rl("memory", "1Gi", "cpu", "1")))
	bestEffort := podOf("e", ctr("c", nil, nil))
	huge := podOf("h", ctr("c", rl("memory", "8Gi"), nil))
	// Burstable by its other container; this one asks for nothing.
	sidecar := podOf("s2", ctr("c", nil, nil), ctr("d", rl("memory", "1Gi"), nil))
	requestOnly := podOf("q", ctr("c", rl("memory", "2Gi"), nil))

	const none = "none"
	for _, tt := range []struct {
		name     string
		pod      *v1.Pod
		opts     ResourceOptions
		swapMax  string // memory.swap.max; none: not set
		v1Memsw  int64  // MemorySwapLimitInBytes
		behavior string
	}{
		{name: "no swap controller: nothing", pod: burstable, opts: ResourceOptions{CgroupV2: true, SwapBehavior: LimitedSwap, MemoryCapacity: 4 * gi, SwapCapacity: gi}, swapMax: none, behavior: NoSwap},
		{name: "v2, default: NoSwap", pod: burstable, opts: ResourceOptions{CgroupV2: true, SwapControllerAvailable: true}, swapMax: "0", behavior: NoSwap},
		{name: "v2, NoSwap", pod: burstable, opts: ResourceOptions{CgroupV2: true, SwapControllerAvailable: true, SwapBehavior: NoSwap}, swapMax: "0", behavior: NoSwap},
		{name: "v1, NoSwap: memory+swap = memory", pod: podOf("v", ctr("c", nil, rl("memory", "64Mi"))), opts: ResourceOptions{SwapControllerAvailable: true}, swapMax: none, v1Memsw: 64 * mi, behavior: NoSwap},
		{name: "v1, LimitedSwap: NoSwap", pod: burstable, opts: ResourceOptions{SwapControllerAvailable: true, SwapBehavior: LimitedSwap, MemoryCapacity: 4 * gi, SwapCapacity: gi}, swapMax: none, v1Memsw: 2 * gi, behavior: NoSwap},
		{name: "LimitedSwap, Burstable: request/capacity of the swap", pod: burstable, opts: v2Limited, swapMax: "268435456", behavior: LimitedSwap},
		{name: "LimitedSwap, static pod", pod: static, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, mirror pod", pod: mirror, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, system-critical priority", pod: critical, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, request = limit", pod: reqIsLimit, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, no memory asked", pod: noMemory, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, Guaranteed", pod: guaranteed, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, BestEffort", pod: bestEffort, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "LimitedSwap, request above the machine's memory: NoSwap", pod: huge, opts: v2Limited, swapMax: "0", behavior: LimitedSwap},
		{name: "LimitedSwap, machine's memory unknown: NoSwap", pod: burstable, opts: ResourceOptions{CgroupV2: true, SwapControllerAvailable: true, SwapBehavior: LimitedSwap, SwapCapacity: gi},
			swapMax: "0", behavior: LimitedSwap},
		{name: "LimitedSwap, request without a limit", pod: requestOnly, opts: v2Limited, swapMax: "536870912", behavior: LimitedSwap},
		{name: "LimitedSwap, Burstable pod, container asking for no memory", pod: sidecar, opts: v2Limited, swapMax: "0", behavior: NoSwap},
		{name: "v1, NoSwap without a memory limit: no memory+swap limit", pod: bestEffort, opts: ResourceOptions{SwapControllerAvailable: true}, swapMax: none, behavior: NoSwap},
		{name: "v1 without the controller: nothing", pod: podOf("v", ctr("c", nil, rl("memory", "64Mi"))), opts: ResourceOptions{}, swapMax: none, behavior: NoSwap},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &tt.pod.Spec.Containers[0]
			r := ContainerResources(tt.pod, c, tt.opts)
			got, ok := r.GetUnified()["memory.swap.max"]
			if !ok {
				got = none
			}
			if got != tt.swapMax {
				t.Errorf("memory.swap.max = %q, want %q", got, tt.swapMax)
			}
			if r.MemorySwapLimitInBytes != tt.v1Memsw {
				t.Errorf("MemorySwapLimitInBytes = %d, want %d", r.MemorySwapLimitInBytes, tt.v1Memsw)
			}
			if b := SwapBehavior(tt.pod, c, tt.opts); b != tt.behavior {
				t.Errorf("SwapBehavior = %q, want %q", b, tt.behavior)
			}
		})
	}
}

// The share of the swap of a LimitedSwap container, and upstream's errors.
func TestLimitedSwapBytes(t *testing.T) {
	for _, tt := range []struct {
		name                  string
		request, memory, swap int64
		want                  int64
		wantErr               string
	}{
		{name: "a quarter of the memory, a quarter of the swap", request: gi, memory: 4 * gi, swap: gi, want: gi / 4},
		{name: "rounded down", request: 1, memory: 3, swap: 100, want: 33},
		{name: "all the memory", request: 4 * gi, memory: 4 * gi, swap: 2 * gi, want: 2 * gi},
		{name: "no swap", request: gi, memory: 4 * gi},
		{name: "no node memory", request: gi, wantErr: "total node memory is 0"},
		{name: "request above the memory", request: 5 * gi, memory: 4 * gi, swap: gi, wantErr: "container request 5368709120 is larger than total node memory 4294967296"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LimitedSwapBytes(tt.request, tt.memory, tt.swap)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("LimitedSwapBytes = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
