package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// BenchmarkConfigMapPropagation measures how long a ConfigMap change takes
// to reach a running pod's configMap volume on a nodelet node with the e2e
// configuration (syncFrequency: 30s): the time from the API server
// accepting the update to the new content being read inside the container
// (polled every 100 ms with CRI exec). Updates are made at random points of
// the resync cycle (a random pause of up to 35 s before each), as real
// changes are; the median (p50) and the max are reported, in seconds.
// CONFIGMAP_UPDATES sets the number of updates (10 by default). Run with
// -benchtime 1x.
func BenchmarkConfigMapPropagation(b *testing.B) {
	updates := 10
	if v, err := strconv.Atoi(os.Getenv("CONFIGMAP_UPDATES")); err == nil && v > 0 {
		updates = v
	}
	const node = "bench-configmap"
	c, _ := clusterNode(b, node)
	ns := c.Namespace(b, "cmbench")
	ctx := context.Background()
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"value": "0"}}
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p := busyboxPod("reader", node, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	framework.Eventually(b, 60*time.Second, 200*time.Millisecond, func() bool {
		got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "reader", metav1.GetOptions{})
		return err == nil && podReady(got)
	}, "the reader pod Ready")
	ctr := c.RunningContainer(b, "reader", "c")
	read := func() string {
		out, _, err := c.Runtime.ExecSync(ctx, ctr.Id, []string{"cat", "/cfg/value"}, 5*time.Second)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}

	b.ResetTimer()
	var lat []time.Duration
	for i := 1; i <= updates; i++ {
		time.Sleep(time.Duration(rand.Int64N(int64(35 * time.Second))))
		want := fmt.Sprint(i)
		cm.Data["value"] = want
		if cm, err = c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for read() != want {
			if time.Since(start) > 3*time.Minute {
				b.Fatalf("update %d not in the pod after 3 minutes", i)
			}
			time.Sleep(100 * time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		b.Logf("update %d: %v", i, lat[len(lat)-1].Round(100*time.Millisecond))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50 := lat[len(lat)/2]
	if len(lat)%2 == 0 {
		p50 = (lat[len(lat)/2-1] + lat[len(lat)/2]) / 2
	}
	b.ReportMetric(p50.Seconds(), "p50-s")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "max-s")
	b.ReportMetric(lat[0].Seconds(), "min-s")
}
