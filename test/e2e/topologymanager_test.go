package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestClusterTopologyManager: topologyManagerPolicy single-numa-node
// over the static CPU manager and the Static memory manager on the
// cluster (this host has one NUMA node: the NUMA cases run in the
// real-node bed, upstream's topology_manager_test). A Guaranteed pod is
// admitted with its CPU alone and its memory on node 0; a Guaranteed pod
// asking every CPU (one is reserved) is refused TopologyAffinityError as
// upstream (no single node can hold it), not "not enough cpus"; the
// topology manager's metrics count both admissions and the refusal.
func TestClusterTopologyManager(t *testing.T) {
	all := onlineCPUs(t)
	name := "e2e-topologymanager"
	c, n := clusterNode(t, name, "topologyManagerPolicy: single-numa-node\ntopologyManagerScope: container\n"+
		"cpuManagerPolicy: static\nkubeReserved: {cpu: 500m, memory: 412Mi}\n"+
		"memoryManagerPolicy: Static\nreservedMemory: [{numaNode: 0, limits: {memory: 512Mi}}]\n")
	ns := c.Namespace(t, "topology")
	ctx := context.Background()
	create := func(podName, cpu string) {
		t.Helper()
		p := busyboxPod(podName, name, "trap 'exit 0' TERM; while true; do sleep 1; done")
		r := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	create("aligned", "1")
	p := waitPod(t, c, ns, "aligned", 60*time.Second, "Ready", podReady)
	id := runningContainer(t, c, string(p.UID), "c").Id
	if got := cpusAllowed(t, containerPid(t, c, id)); got == all.String() || got == "0" {
		t.Errorf("the aligned pod runs on CPUs %s, want one exclusive CPU", got)
	}
	if got := specMems(t, c, id); got != "0" {
		t.Errorf("the aligned pod's cpuset.mems %q, want 0", got)
	}

	create("toobig", strconv.Itoa(all.Size()))
	p = waitPod(t, c, ns, "toobig", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "TopologyAffinityError" || p.Status.Message != "Pod was rejected: Resources cannot be allocated with Topology locality" {
		t.Errorf("a pod asking every CPU: %s %q", p.Status.Reason, p.Status.Message)
	}

	fams := kubeletMetrics(t, c, n)
	value := func(name string) float64 {
		var v float64
		for _, m := range fams[name].GetMetric() {
			v += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return v
	}
	if r, e, d := value("kubelet_topology_manager_admission_requests_total"), value("kubelet_topology_manager_admission_errors_total"),
		value("kubelet_topology_manager_admission_duration_ms"); r < 2 || e != 1 || d < 2 {
		t.Errorf("topology manager metrics: requests %v, errors %v, durations %v", r, e, d)
	}
	if failures := alignedCount(fams, "failure_count", "numa_node"); failures != 1 {
		t.Errorf("kubelet_container_aligned_compute_resources_failure_count{scope=container,boundary=numa_node} = %v, want 1", failures)
	}
}

// kubeletMetrics are the node's /metrics, parsed.
func kubeletMetrics(t *testing.T, c *framework.Cluster, n *framework.Nodelet) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// alignedCount is kubelet_container_aligned_compute_resources_<suffix>
// {scope="container",boundary} (-1 when the series is absent).
func alignedCount(fams map[string]*dto.MetricFamily, suffix, boundary string) float64 {
	for _, m := range fams["kubelet_container_aligned_compute_resources_"+suffix].GetMetric() {
		if matches(m, map[string]string{"scope": "container", "boundary": boundary}) {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
