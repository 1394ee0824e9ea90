package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// BenchmarkStaticPodStartup measures, per pod, the time from a manifest
// appearing in the static pod directory to its container running (the
// container's StartedAt in containerd). Run with -benchtime=20x for the
// median of 20. Images are present (pulled by the stack).
func BenchmarkStaticPodStartup(b *testing.B) {
	s := framework.RequireStack(b)
	n := framework.NewNodelet(b, s, "bench-start")
	n.Start()
	// Warm up: the first pod pays for the image pull.
	n.WriteManifest("warm.yaml", podManifest("warm", "  terminationGracePeriodSeconds: 0\n", container("c", "exec sleep 3600")))
	waitRunningB(b, s, n.PodName("warm"), "c")

	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("p%d", i)
		start := time.Now()
		n.WriteManifest(name+".yaml", podManifest(name, "  terminationGracePeriodSeconds: 0\n", container("c", "exec sleep 3600")))
		c := waitRunningB(b, s, n.PodName(name), "c")
		st := s.ContainerStatus(b, c.Id)
		lat = append(lat, time.Unix(0, st.StartedAt).Sub(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*9/10]), "p90-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// BenchmarkRSS10Pods reports nodelet's resident memory with 10 running pods,
// after they settled for 10 s.
func BenchmarkRSS10Pods(b *testing.B) {
	s := framework.RequireStack(b)
	n := framework.NewNodelet(b, s, "bench-rss")
	n.Start()
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("r%d", i)
		n.WriteManifest(name+".yaml", podManifest(name, "  terminationGracePeriodSeconds: 0\n", container("c", "exec sleep 3600")))
	}
	for i := 0; i < 10; i++ {
		waitRunningB(b, s, n.PodName(fmt.Sprintf("r%d", i)), "c")
	}
	time.Sleep(10 * time.Second)
	b.ResetTimer()
	var rss float64
	for i := 0; i < b.N; i++ {
		rss = rssMiB(b, n.Pid())
	}
	b.ReportMetric(rss, "RSS-MiB")
}

func waitRunningB(b *testing.B, s *framework.Stack, pod, c string) *runtimeapi.Container {
	var got *runtimeapi.Container
	framework.Eventually(b, 60*time.Second, 10*time.Millisecond, func() bool {
		got = s.RunningContainer(b, pod, c)
		return got != nil
	}, "container %s of %s running", c, pod)
	return got
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rssMiB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
