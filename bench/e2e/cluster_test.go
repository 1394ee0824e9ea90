package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// BenchmarkClusterNode50Pods measures, on a nodelet node of the local
// control plane: the time from creating a pod (scheduled by kube-scheduler)
// to the watch event that shows it Running, for 50 pods created one after
// the other (p50, p99, max); then, with the 50 pods running, the API
// requests the node makes in a minute of idling (counted from the API
// server's audit log) and nodelet's RSS.
func BenchmarkClusterNode50Pods(b *testing.B) {
	const node, pods = "bench-cluster", 50
	c, n := clusterNode(b, node)
	ns := c.Namespace(b, "bench")
	ctx := context.Background()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	running := make(chan string, pods)
	go func() {
		seen := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if ok && ev.Type == watch.Modified && p.Status.Phase == v1.PodRunning && !seen[p.Name] {
				seen[p.Name] = true
				running <- p.Name
			}
		}
	}()

	b.ResetTimer()
	var lat []time.Duration
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("p%02d", i)
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{
				NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []v1.Container{{Name: "c", Image: busybox, Command: []string{"sleep", "3600"}}},
			},
		}
		start := time.Now()
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		select {
		case got := <-running:
			if got != name {
				b.Fatalf("pod %s reported Running while waiting for %s", got, name)
			}
			lat = append(lat, time.Since(start))
		case <-time.After(60 * time.Second):
			b.Fatalf("pod %s not Running after 60 s", name)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(ms(lat[len(lat)/2]), "start-p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "start-p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "start-max-ms")

	// Idle minute with 50 pods: requests seen by the API server.
	time.Sleep(15 * time.Second)
	off := fileSize(b, c.AuditLog)
	time.Sleep(60 * time.Second)
	b.ReportMetric(float64(countAudit(b, c.AuditLog, off, "system:node:"+node)), "api-req/min")
	b.ReportMetric(rssMiB(b, n.Pid()), "RSS-MiB")
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatalf("audit log: %v", err)
	}
	return st.Size()
}

// countAudit counts the distinct requests of user in the audit log after
// offset.
func countAudit(b *testing.B, path string, offset int64, user string) int {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			AuditID string `json:"auditID"`
			User    struct {
				Username string `json:"username"`
			} `json:"user"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.User.Username == user {
			ids[ev.AuditID] = true
		}
	}
	return len(ids)
}
