package kuberuntime

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/cgroups"
)

// The container's CRI config carries the swap of memorySwap.swapBehavior
// (cgroups.ContainerResources); a LimitedSwap share that cannot be
// computed is no swap, with upstream's error logged.
func TestContainerConfigSwap(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    cgroups.ResourceOptions
		swapMax string
		logged  bool
	}{
		{name: "no swap controller: nothing", opts: cgroups.ResourceOptions{CgroupV2: true, SwapBehavior: cgroups.LimitedSwap, MemoryCapacity: 4 << 30, SwapCapacity: 1 << 30}},
		{name: "NoSwap", opts: cgroups.ResourceOptions{CgroupV2: true, SwapControllerAvailable: true}, swapMax: "0"},
		{name: "LimitedSwap", opts: cgroups.ResourceOptions{CgroupV2: true, SwapControllerAvailable: true, SwapBehavior: cgroups.LimitedSwap, MemoryCapacity: 4 << 30, SwapCapacity: 1 << 30},
			swapMax: "268435456"},
		{name: "LimitedSwap, node memory unknown", opts: cgroups.ResourceOptions{CgroupV2: true, SwapControllerAvailable: true, SwapBehavior: cgroups.LimitedSwap, SwapCapacity: 1 << 30},
			swapMax: "0", logged: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			m.cfg.Resources = tt.opts
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Gi")},
			}
			var logs strings.Builder
			ctx := klog.NewContext(context.Background(), funcr.New(func(prefix, args string) { logs.WriteString(args + "\n") }, funcr.Options{}))
			cfg, err := m.containerConfig(ctx, pod, &pod.Spec.Containers[0], 0, "img", podFacts{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := cfg.Linux.Resources.Unified["memory.swap.max"]
			if ok != (tt.swapMax != "") || got != tt.swapMax {
				t.Errorf("memory.swap.max = %q (set %v), want %q", got, ok, tt.swapMax)
			}
			if logged := strings.Contains(logs.String(), "Cannot calculate swap allocation amount; disallowing swap"); logged != tt.logged {
				t.Errorf("upstream's error logged %v, want %v:\n%s", logged, tt.logged, logs.String())
			}
		})
	}
}
