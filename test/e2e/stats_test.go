package e2e

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

// cgroupOf returns the host path of a container's cgroup in the cgroup v1
// controller named (cpuacct, memory), from its main process.
func cgroupOf(t *testing.T, s *framework.Stack, id, controller string) string {
	t.Helper()
	dir, err := nodeagent.CgroupOf(context.Background(), s.Runtime, id, controller)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readInt(t *testing.T, path string) float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// workingSet is usage - total_inactive_file of a cgroup v1 memory cgroup.
func workingSet(t *testing.T, dir string) float64 {
	t.Helper()
	usage := readInt(t, filepath.Join(dir, "memory.usage_in_bytes"))
	data, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "total_inactive_file" {
			inactive, _ := strconv.ParseFloat(f[1], 64)
			return math.Max(0, usage-inactive)
		}
	}
	return usage
}

func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

// TestStatsSummaryAndResourceMetrics: /stats/summary (read through the API
// server's node proxy, as metrics-server and kubectl do) and
// /metrics/resource report what the containers really use, checked against
// their cgroups within 10%: a CPU burner limited to 200m and a container
// holding 64 MiB in tmpfs.
// runBurnerAndHog runs two pods on node and waits for them: "burner"
// burning CPU at its 200m limit, "hog" holding 64 MiB of tmpfs.
func runBurnerAndHog(t *testing.T, c *framework.Cluster, ns, node string) {
	t.Helper()
	burner := busyboxPod("burner", node, `while :; do :; done`)
	burner.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
	hog := busyboxPod("hog", node, `dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>/dev/null; sleep 3600`)
	createPods(t, c, ns, burner, hog)
	for _, name := range []string{"burner", "hog"} {
		waitPod(t, c, ns, name, 60*time.Second, "Running", podReady)
	}
}

func TestStatsSummaryAndResourceMetrics(t *testing.T) {
	const node = "stats-node"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "stats")
	runBurnerAndHog(t, c, ns, node)
	burnerID := strings.TrimPrefix(c.Pod(t, ns, "burner").Status.ContainerStatuses[0].ContainerID, "containerd://")
	hogID := strings.TrimPrefix(c.Pod(t, ns, "hog").Status.ContainerStatuses[0].ContainerID, "containerd://")
	cpuDir := cgroupOf(t, c.Stack, burnerID, "cpuacct")
	memDir := cgroupOf(t, c.Stack, hogID, "memory")
	time.Sleep(3 * time.Second) // the hog has filled its tmpfs, the burner runs at its quota

	summary := func() *statsapi.Summary {
		out, err := c.KubectlOut(t, 30*time.Second, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")
		if err != nil {
			t.Fatalf("stats/summary through the API server: %v %s", err, out)
		}
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	container := func(s *statsapi.Summary, pod string) *statsapi.ContainerStats {
		for _, p := range s.Pods {
			if p.PodRef.Name == pod && p.PodRef.Namespace == ns && len(p.Containers) == 1 {
				return &p.Containers[0]
			}
		}
		t.Fatalf("summary has no pod %s: %+v", pod, s.Pods)
		return nil
	}

	// CPU: the rate the summary reports against the cgroup's counter over
	// the same window.
	summary()
	cg0, t0 := readInt(t, filepath.Join(cpuDir, "cpuacct.usage")), time.Now()
	time.Sleep(2 * time.Second)
	s := summary()
	cg1, t1 := readInt(t, filepath.Join(cpuDir, "cpuacct.usage")), time.Now()
	realRate := (cg1 - cg0) / t1.Sub(t0).Seconds() // ns per s = nanocores
	bc := container(s, "burner")
	if bc.CPU == nil || bc.CPU.UsageNanoCores == nil || !within(float64(*bc.CPU.UsageNanoCores), realRate, 0.10) {
		t.Fatalf("burner cpu: summary %v nanocores, cgroup %.0f", bc.CPU, realRate)
	}
	if !within(realRate, 200e6, 0.10) {
		t.Fatalf("burner uses %.0f nanocores, want about 200m (its limit)", realRate)
	}
	if got, want := float64(*bc.CPU.UsageCoreNanoSeconds), readInt(t, filepath.Join(cpuDir, "cpuacct.usage")); !within(got, want, 0.10) {
		t.Fatalf("burner cumulative cpu: summary %.0f, cgroup %.0f", got, want)
	}
	// Memory: the working set against the cgroup's usage - inactive_file.
	hc := container(s, "hog")
	real := workingSet(t, memDir)
	if hc.Memory == nil || hc.Memory.WorkingSetBytes == nil || !within(float64(*hc.Memory.WorkingSetBytes), real, 0.10) || real < 64<<20 {
		t.Fatalf("hog memory: summary %v, cgroup working set %.0f (want >= 64 MiB)", hc.Memory, real)
	}
	if s.Node.Memory == nil || s.Node.Memory.WorkingSetBytes == nil || s.Node.CPU == nil || s.Node.Fs == nil || s.Node.Fs.CapacityBytes == nil {
		t.Fatalf("node stats incomplete: %+v", s.Node)
	}
	nodeWS := workingSet(t, "/sys/fs/cgroup/memory")
	if !within(float64(*s.Node.Memory.WorkingSetBytes), nodeWS, 0.10) {
		t.Fatalf("node working set: summary %d, root cgroup %.0f", *s.Node.Memory.WorkingSetBytes, nodeWS)
	}

	// /metrics/resource, as metrics-server scrapes it.
	code, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics/resource")
	if code != http.StatusOK {
		t.Fatalf("/metrics/resource: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body + "\n"))
	if err != nil {
		t.Fatalf("/metrics/resource does not parse: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		for _, m := range fams[name].GetMetric() {
			if matches(m, labels) {
				return metricValue(m)
			}
		}
		t.Fatalf("/metrics/resource has no %s%v", name, labels)
		return 0
	}
	hogLabels := map[string]string{"container": "c", "pod": "hog", "namespace": ns}
	if got, real := value("container_memory_working_set_bytes", hogLabels), workingSet(t, memDir); !within(got, real, 0.10) {
		t.Fatalf("container_memory_working_set_bytes %.0f, cgroup %.0f", got, real)
	}
	burnerLabels := map[string]string{"container": "c", "pod": "burner", "namespace": ns}
	if got, real := value("container_cpu_usage_seconds_total", burnerLabels), readInt(t, filepath.Join(cpuDir, "cpuacct.usage"))/1e9; !within(got, real, 0.10) {
		t.Fatalf("container_cpu_usage_seconds_total %.2f, cgroup %.2f", got, real)
	}
	if value("pod_memory_working_set_bytes", map[string]string{"pod": "hog", "namespace": ns}) < 64<<20 {
		t.Fatal("pod_memory_working_set_bytes of hog below 64 MiB")
	}
	if value("node_memory_working_set_bytes", nil) <= 0 || value("resource_scrape_error", nil) != 0 {
		t.Fatal("node metrics missing or scrape error")
	}
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return m.GetUntyped().GetValue()
}
