package stats

import (
	"math"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

// cgroupSwap is a pod's or container's swap from its cgroup (id), as
// cadvisor's reported upstream: the usage always (0 where the cgroup
// accounts none: no swap controller, or cgroup v1 without memsw), the
// available bytes when the swap is limited.
func cgroupSwap(cg machine.Cgroups, id string, at time.Time) *statsv1alpha1.SwapStats {
	dir := cg.Dir("memory", id)
	out := &statsv1alpha1.SwapStats{Time: metav1.NewTime(at), SwapUsageBytes: ptr[uint64](0)}
	if cg.V2 {
		if v, err := readUint(filepath.Join(dir, "memory.swap.current")); err == nil {
			out.SwapUsageBytes = ptr(v)
		}
		if limit, err := readMax(filepath.Join(dir, "memory.swap.max")); err == nil && limit != math.MaxUint64 {
			out.SwapAvailableBytes = ptr(sub0(limit, *out.SwapUsageBytes))
		}
		return out
	}
	memsw, err1 := readUint(filepath.Join(dir, "memory.memsw.usage_in_bytes"))
	mem, err2 := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err1 == nil && err2 == nil {
		out.SwapUsageBytes = ptr(sub0(memsw, mem))
	}
	return out
}
