package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

// topRow is the row of name in kubectl top's output, split in columns.
func topRow(out, name string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// quantity parses kubectl top's "200m" or "65Mi".
func quantity(t *testing.T, s string) float64 {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Fatalf("kubectl top figure %q: %v", s, err)
	}
	return q.AsApproximateFloat64()
}

// TestMetricsServerTop runs metrics-server (built from the Go module
// proxy) against the control plane, behind the aggregated metrics API,
// checking nodelet's serving certificate against the cluster CA, and
// reads `kubectl top pod` and `kubectl top node`: the CPU of a container
// burning at its 200m limit and the memory of one holding 64 MiB match
// their cgroups.
func TestMetricsServerTop(t *testing.T) {
	const node = "e2e-top"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "top")
	runBurnerAndHog(t, c, ns, node)
	if c.Env["METRICS_SERVER_BIN"] == "" && !framework.InCI() {
		t.Skip("metrics-server is not built (run make cluster-up)")
	}
	ms, err := nodeagent.StartMetricsServer(c.Env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("metrics-server log:\n%s", ms.Log())
		}
		ms.Stop()
	})
	start := time.Now()
	var pods string
	framework.Eventually(t, 120*time.Second, time.Second, func() bool {
		out, err := ms.Top("pod", "-n", ns)
		pods = out
		return err == nil && topRow(out, "burner") != nil && topRow(out, "hog") != nil
	}, "kubectl top pod lists both pods")
	t.Logf("metrics-server start -> kubectl top pod answers: %v\n%s", time.Since(start).Round(time.Second), pods)
	nodes, err := ms.Top("node", node)
	if err != nil || topRow(nodes, node) == nil {
		t.Fatalf("kubectl top node: %v\n%s", err, nodes)
	}
	t.Logf("kubectl top node:\n%s", nodes)

	// The figures against the cgroups (metrics-server's CPU is a rate over
	// its last two scrapes).
	hogID := strings.TrimPrefix(c.Pod(t, ns, "hog").Status.ContainerStatuses[0].ContainerID, "containerd://")
	memDir := cgroupOf(t, c.Stack, hogID, "memory")
	if cpu := quantity(t, topRow(pods, "burner")[1]); !within(cpu, 0.2, 0.15) {
		t.Errorf("kubectl top: burner uses %v cores, want about 0.2 (its limit)", cpu)
	}
	if mem, real := quantity(t, topRow(pods, "hog")[2]), workingSet(t, memDir); !within(mem, real, 0.10) || real < 64<<20 {
		t.Errorf("kubectl top: hog uses %.0f bytes, its cgroup's working set is %.0f", mem, real)
	}
	row := topRow(nodes, node)
	if len(row) < 5 || !strings.HasSuffix(row[2], "%") || !strings.HasSuffix(row[4], "%") {
		t.Fatalf("kubectl top node row %v", row)
	}
	if mem, real := quantity(t, row[3]), workingSet(t, "/sys/fs/cgroup/memory"); !within(mem, real, 0.15) {
		t.Errorf("kubectl top node: memory %.0f, the root cgroup's working set %.0f", mem, real)
	}
	if pct, _ := strconv.Atoi(strings.TrimSuffix(row[2], "%")); pct <= 0 {
		t.Errorf("kubectl top node: CPU %s", row[2])
	}
}
