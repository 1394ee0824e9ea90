package stats

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

func TestCgroupSwap(t *testing.T) {
	write := func(dir string, files map[string]string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	v2 := machine.Cgroups{Mount: t.TempDir(), V2: true}
	write(v2.Dir("memory", "/kubepods/limited"), map[string]string{"memory.swap.current": "4096\n", "memory.swap.max": "1048576\n"})
	write(v2.Dir("memory", "/kubepods/unlimited"), map[string]string{"memory.swap.current": "8192\n", "memory.swap.max": "max\n"})
	write(v2.Dir("memory", "/kubepods/noswap"), map[string]string{})
	v1 := machine.Cgroups{Mount: t.TempDir()}
	write(v1.Dir("memory", "/kubepods/memsw"), map[string]string{"memory.memsw.usage_in_bytes": "10000", "memory.usage_in_bytes": "9000"})
	write(v1.Dir("memory", "/kubepods/nomemsw"), map[string]string{"memory.usage_in_bytes": "9000"})
	num := func(p *uint64) string {
		if p == nil {
			return "nil"
		}
		return strconv.FormatUint(*p, 10)
	}
	for _, tc := range []struct {
		cg              machine.Cgroups
		id, usage, free string
	}{
		{v2, "/kubepods/limited", "4096", "1044480"},
		{v2, "/kubepods/unlimited", "8192", "nil"},
		{v2, "/kubepods/noswap", "0", "nil"},
		{v1, "/kubepods/memsw", "1000", "nil"},
		{v1, "/kubepods/nomemsw", "0", "nil"},
	} {
		sw := cgroupSwap(tc.cg, tc.id, time.Unix(100, 0))
		if got := num(sw.SwapUsageBytes) + "/" + num(sw.SwapAvailableBytes); got != tc.usage+"/"+tc.free {
			t.Errorf("%s (v2 %v): usage/available %s, want %s/%s", tc.id, tc.cg.V2, got, tc.usage, tc.free)
		}
	}
}

// The containers' and pods' swap, as upstream's resource metrics: the
// usage, and the limit (available plus usage) where one is known.
func TestSwapResourceMetrics(t *testing.T) {
	at := metav1.NewTime(time.UnixMilli(1893456000000))
	u := func(v uint64) *uint64 { return &v }
	s := &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{{
		PodRef: statsv1alpha1.PodReference{Name: "a", Namespace: "ns"},
		Swap:   &statsv1alpha1.SwapStats{Time: at, SwapUsageBytes: u(3000)},
		Containers: []statsv1alpha1.ContainerStats{
			{Name: "limited", Swap: &statsv1alpha1.SwapStats{Time: at, SwapUsageBytes: u(1000), SwapAvailableBytes: u(9000)}},
			{Name: "unlimited", Swap: &statsv1alpha1.SwapStats{Time: at, SwapUsageBytes: u(2000)}},
		},
	}}}
	col := collectorFunc(func(ch chan<- prometheus.Metric) { collectMetrics(ch, s) })
	const expected = `
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{container="limited",namespace="ns",pod="a"} 10000 1893456000000
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="limited",namespace="ns",pod="a"} 1000 1893456000000
container_swap_usage_bytes{container="unlimited",namespace="ns",pod="a"} 2000 1893456000000
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{namespace="ns",pod="a"} 3000 1893456000000
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(expected), "container_swap_limit_bytes", "container_swap_usage_bytes", "pod_swap_usage_bytes"); err != nil {
		t.Error(err)
	}
}

// collectorFunc is a prometheus.Collector of a collect function (unchecked).
type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
