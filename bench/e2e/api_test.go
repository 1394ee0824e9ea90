package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// BenchmarkKubeletAPI measures, through the API server and kubectl: the
// time of `kubectl exec POD -- true` (median of 20), and the throughput of
// `kubectl logs -f` on a container writing as fast as it can, next to the
// rate at which the runtime writes its log file.
func BenchmarkKubeletAPI(b *testing.B) {
	const node = "bench-api"
	c, n := clusterNode(b, node)
	ns := c.Namespace(b, "bench-api")
	ctx := context.Background()
	line := strings.Repeat("0123456789", 10)
	for _, p := range []*v1.Pod{busyboxPod("shell", node, "sleep 3600"), busyboxPod("writer", node, "yes "+line)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"shell", "writer"} {
		framework.Eventually(b, 60*time.Second, 200*time.Millisecond, func() bool {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == v1.PodRunning
		}, "pod %s Running", name)
	}
	b.ResetTimer()
	var took []time.Duration
	for range 20 {
		start := time.Now()
		if out, err := c.KubectlOut(b, 30*time.Second, "-n", ns, "exec", "shell", "--", "true"); err != nil {
			b.Fatalf("kubectl exec: %v %s", err, out)
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[10].Microseconds())/1000, "exec-p50-ms")

	// kubectl logs -f for 5 s.
	const window = 5 * time.Second
	fctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	cmd := c.Kubectl(fctx, "-n", ns, "logs", "-f", "--tail=0", "writer")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	got, _ := io.Copy(io.Discard, out)
	_ = cmd.Wait()
	b.ReportMetric(float64(got)/time.Since(start).Seconds()/(1<<20), "logs-f-MiB/s")
	b.StopTimer()
	// The runtime's own rate: how fast the log file grows (one second
	// without a rotation in between).
	files, _ := filepath.Glob(filepath.Join(n.LogsDir, ns+"_writer_*", "c", "0.log"))
	if len(files) == 1 {
		for range 10 {
			a, err := os.Stat(files[0])
			time.Sleep(time.Second)
			z, err2 := os.Stat(files[0])
			if err == nil && err2 == nil && z.Size() > a.Size() {
				// The CRI log adds ~40 bytes of timestamp and tags per 101-byte line.
				b.ReportMetric(float64(z.Size()-a.Size())/(1<<20), "runtime-log-MiB/s")
				break
			}
		}
	}
}
