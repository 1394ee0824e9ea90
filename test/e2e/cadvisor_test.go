package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestCadvisorMetrics: /metrics/cadvisor, scraped through the API server's
// node proxy as Prometheus' kubernetes_sd "cadvisor" job does and parsed with
// Prometheus' own text parser, serves every family above with cadvisor's
// labels, and its values are the containers' cgroups: a CPU burner limited
// to 200m (usage, its quota, throttling), a pod holding 64 MiB of tmpfs
// under a 128 MiB limit (working set, cache, the limit), a pod sending
// packets (its sandbox's network), the machine's cores and memory.
func TestCadvisorMetrics(t *testing.T) {
	const node = "cadvisor-node"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "cadvisor")
	ctx := context.Background()
	burner := busyboxPod("burner", node, `while :; do :; done`)
	burner.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
	hog := busyboxPod("hog", node, `dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>/dev/null; sleep 3600`)
	hog.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
	pinger := busyboxPod("pinger", node, `ping -c 20 -i 0.2 `+c.NodeIP+`; sleep 3600`)
	// Direct I/O to its root filesystem, 3 s in (once the test gave its
	// cgroup a throttle rule: this kernel accounts v1 block I/O only for
	// cgroups with one).
	writer := busyboxPod("writer", node, `sleep 3; dd if=/dev/zero of=/data bs=1M count=8 oflag=direct; dd if=/data of=/dev/null bs=1M iflag=direct; sleep 3600`)
	for _, p := range []*v1.Pod{burner, hog, pinger, writer} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"writer", "burner", "hog", "pinger"} {
		waitPod(t, c, ns, name, 60*time.Second, "Running", podReady)
	}
	disk := accountBlockIO(t, cgroupOf(t, c.Stack, strings.TrimPrefix(c.Pod(t, ns, "writer").Status.ContainerStatuses[0].ContainerID, "containerd://"), "blkio"), c.RepoRoot)
	id := func(pod string) string {
		return strings.TrimPrefix(c.Pod(t, ns, pod).Status.ContainerStatuses[0].ContainerID, "containerd://")
	}
	burnerID, hogID := id("burner"), id("hog")
	cpuDir := cgroupOf(t, c.Stack, burnerID, "cpuacct")
	memDir := cgroupOf(t, c.Stack, hogID, "memory")
	time.Sleep(5 * time.Second) // the hog filled its tmpfs, the burner is throttled, the pinger pinged

	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		out, err := c.KubectlOut(t, 30*time.Second, "get", "--raw", "/api/v1/nodes/"+node+"/proxy/metrics/cadvisor")
		if err != nil {
			t.Fatalf("/metrics/cadvisor through the API server: %v %s", err, out)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(out))
		if err != nil {
			t.Fatalf("/metrics/cadvisor does not parse: %v", err)
		}
		return fams
	}
	fams := scrape()
	var missing []string
	for _, f := range nodeagent.CadvisorFamilies {
		if fams[f] == nil || len(fams[f].Metric) == 0 {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Errorf("/metrics/cadvisor lacks %d of %d families: %v", len(missing), len(nodeagent.CadvisorFamilies), missing)
	}
	t.Logf("/metrics/cadvisor: %d families, %d of the %d listed", len(fams), len(nodeagent.CadvisorFamilies)-len(missing), len(nodeagent.CadvisorFamilies))
	// Every series carries cadvisor's labels.
	for name, f := range fams {
		if !strings.HasPrefix(name, "container_") || name == "container_scrape_error" {
			continue
		}
		for _, m := range f.Metric {
			have := map[string]bool{}
			for _, l := range m.Label {
				have[l.GetName()] = true
			}
			for _, l := range []string{"container", "id", "image", "name", "namespace", "pod"} {
				if !have[l] {
					t.Fatalf("%s series without label %s: %v", name, l, m.Label)
				}
			}
		}
	}

	value := func(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, map[string]string) {
		t.Helper()
		for _, m := range fams[name].GetMetric() {
			if matches(m, labels) {
				got := map[string]string{}
				for _, l := range m.Label {
					got[l.GetName()] = l.GetValue()
				}
				return metricValue(m), got
			}
		}
		t.Fatalf("/metrics/cadvisor has no %s%v", name, labels)
		return 0, nil
	}
	ctr := func(pod string) map[string]string {
		return map[string]string{"container": "c", "pod": pod, "namespace": ns}
	}

	// The burner: its CPU against its cgroup, its quota, throttling.
	got, labels := value(fams, "container_cpu_usage_seconds_total", map[string]string{"container": "c", "pod": "burner", "namespace": ns, "cpu": "total"})
	if real := readInt(t, filepath.Join(cpuDir, "cpuacct.usage")) / 1e9; !within(got, real, 0.10) {
		t.Errorf("burner container_cpu_usage_seconds_total %.2f, cgroup %.2f", got, real)
	}
	if labels["name"] != burnerID || labels["image"] != busybox || !strings.HasSuffix(labels["id"], "/"+burnerID) || !strings.Contains(labels["id"], "/kubepods/") {
		t.Errorf("burner labels %v (container ID %s)", labels, burnerID)
	}
	if q, _ := value(fams, "container_spec_cpu_quota", ctr("burner")); q != 20000 {
		t.Errorf("burner container_spec_cpu_quota %v, want 20000 (200m of a 100000 us period)", q)
	}
	if p, _ := value(fams, "container_spec_cpu_period", ctr("burner")); p != 100000 {
		t.Errorf("burner container_spec_cpu_period %v", p)
	}
	if th, _ := value(fams, "container_cpu_cfs_throttled_periods_total", ctr("burner")); th <= 0 {
		t.Errorf("burner container_cpu_cfs_throttled_periods_total %v, want > 0 (it spins under a quota)", th)
	}
	// The hog: memory against its cgroup, and its limit.
	if got, _ := value(fams, "container_memory_working_set_bytes", ctr("hog")); !within(got, workingSet(t, memDir), 0.10) || got < 64<<20 {
		t.Errorf("hog container_memory_working_set_bytes %.0f, cgroup %.0f", got, workingSet(t, memDir))
	}
	stat := readMemoryStat(t, memDir)
	if got, _ := value(fams, "container_memory_cache", ctr("hog")); !within(got, stat["total_cache"], 0.10) || got < 64<<20 {
		t.Errorf("hog container_memory_cache %.0f, cgroup total_cache %.0f (64 MiB of tmpfs)", got, stat["total_cache"])
	}
	if got, _ := value(fams, "container_memory_rss", ctr("hog")); math.Abs(got-stat["total_rss"]) > 1<<20 {
		t.Errorf("hog container_memory_rss %.0f, cgroup total_rss %.0f", got, stat["total_rss"])
	}
	if got, _ := value(fams, "container_spec_memory_limit_bytes", ctr("hog")); got != 128<<20 {
		t.Errorf("hog container_spec_memory_limit_bytes %.0f, want 128Mi", got)
	}
	if got, _ := value(fams, "container_spec_memory_limit_bytes", ctr("burner")); got != 0 {
		t.Errorf("burner (no memory limit) container_spec_memory_limit_bytes %.0f, want 0 as cadvisor", got)
	}
	if got, _ := value(fams, "container_oom_events_total", ctr("hog")); got != 0 {
		t.Errorf("hog container_oom_events_total %v", got)
	}
	if got, _ := value(fams, "container_fs_usage_bytes", ctr("hog")); got < 0 {
		t.Errorf("hog container_fs_usage_bytes %v", got)
	}
	// The writer's block I/O, on the disk under the runtime's root.
	if got, _ := value(fams, "container_fs_writes_bytes_total", map[string]string{"container": "c", "pod": "writer", "namespace": ns, "device": disk}); got < 8<<20 {
		t.Errorf("writer container_fs_writes_bytes_total{device=%s} %v, want >= 8 MiB", disk, got)
	}
	if got, _ := value(fams, "container_fs_reads_bytes_total", map[string]string{"container": "c", "pod": "writer", "namespace": ns, "device": disk}); got < 8<<20 {
		t.Errorf("writer container_fs_reads_bytes_total{device=%s} %v, want >= 8 MiB", disk, got)
	}
	// The pinger's pod network, on its sandbox (container "") as cadvisor
	// reports the pause container's.
	if got, l := value(fams, "container_network_transmit_packets_total", map[string]string{"container": "", "pod": "pinger", "namespace": ns, "interface": "eth0"}); got < 20 {
		t.Errorf("pinger's sandbox container_network_transmit_packets_total %v (%v), want >= 20 pings", got, l)
	}
	// The machine and the root cgroup.
	if got, _ := value(fams, "machine_cpu_cores", nil); got != float64(runtime.NumCPU()) {
		t.Errorf("machine_cpu_cores %v, want %d", got, runtime.NumCPU())
	}
	if got, _ := value(fams, "machine_memory_bytes", nil); !within(got, memTotal(t), 0.001) {
		t.Errorf("machine_memory_bytes %v, MemTotal %v", got, memTotal(t))
	}
	if got, _ := value(fams, "container_cpu_usage_seconds_total", map[string]string{"id": "/", "cpu": "total"}); !within(got, readInt(t, "/sys/fs/cgroup/cpuacct/cpuacct.usage")/1e9, 0.05) {
		t.Errorf("root container_cpu_usage_seconds_total %v", got)
	}
	if got, _ := value(fams, "container_scrape_error", nil); got != 0 {
		t.Errorf("container_scrape_error %v", got)
	}

	// The kubelet API itself serves it too (Prometheus' direct node scrape).
	code, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics/cadvisor")
	if code != http.StatusOK || !strings.Contains(body, "container_cpu_usage_seconds_total{") {
		t.Errorf("/metrics/cadvisor on the kubelet API: %d", code)
	}
	var names []string
	for f := range fams {
		names = append(names, f)
	}
	sort.Strings(names)
	t.Logf("families: %s", strings.Join(names, " "))
}

// accountBlockIO gives the blkio cgroup dir a throttle rule far above any
// real rate on the disk holding dir (so the kernel accounts its I/O) and
// returns the disk's name as cadvisor labels it (/dev/vda).
func accountBlockIO(t *testing.T, cgroupDir, dir string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	sysDev := "/sys/dev/block/" + dev
	if _, err := os.Stat(filepath.Join(sysDev, "partition")); err == nil {
		// A partition: throttle rules name the whole disk.
		b, err := os.ReadFile(filepath.Join(sysDev, "..", "dev"))
		if err != nil {
			t.Fatal(err)
		}
		dev, sysDev = strings.TrimSpace(string(b)), filepath.Join(sysDev, "..")
	}
	for _, f := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"} {
		if err := os.WriteFile(filepath.Join(cgroupDir, f), []byte(dev+" 1099511627776"), 0o644); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(sysDev, "uevent"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "DEVNAME="); ok {
			return "/dev/" + name
		}
	}
	t.Fatalf("no DEVNAME for %s", dev)
	return ""
}

func readMemoryStat(t *testing.T, dir string) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		var k string
		var v float64
		if _, err := fmt.Sscan(line, &k, &v); err == nil {
			out[k] = v
		}
	}
	return out
}

func memTotal(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var kb float64
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			fmt.Sscan(strings.TrimPrefix(line, "MemTotal:"), &kb)
		}
	}
	return kb * 1024
}
