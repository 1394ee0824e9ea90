package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// prometheusConfig is kube-prometheus's kubelet scrape, written as plain
// jobs: the API server's node proxy for /metrics and /metrics/cadvisor of
// the nodes kubernetes_sd finds (kept: only node), job="kubelet" with a
// metrics_path label, as its ServiceMonitor makes them.
const prometheusConfig = `global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [rules.yml]
scrape_configs:
%[1]s`

const prometheusJob = `- job_name: kubelet-%[1]s
  scheme: https
  tls_config: &tls%[1]s {ca_file: %[3]s/ca.crt, cert_file: %[3]s/admin.crt, key_file: %[3]s/admin.key}
  kubernetes_sd_configs:
  - {role: node, api_server: "https://127.0.0.1:6443", tls_config: *tls%[1]s}
  relabel_configs:
  - {source_labels: [__meta_kubernetes_node_name], regex: "%[4]s", action: keep}
  - {target_label: __address__, replacement: "127.0.0.1:6443"}
  - {source_labels: [__meta_kubernetes_node_name], target_label: __metrics_path__, replacement: "/api/v1/nodes/${1}/proxy%[2]s"}
  - {source_labels: [__meta_kubernetes_node_name], target_label: instance}
  - {source_labels: [__meta_kubernetes_node_name], target_label: node}
  - {source_labels: [__metrics_path__], target_label: metrics_path, replacement: "%[2]s"}
  - {target_label: job, replacement: kubelet}
`

// prometheusRules: kube-prometheus's kubelet.rules recording rule as it
// ships, and a cadvisor one of the same shape (its k8s.rules join
// kube-state-metrics' kube_pod_info, which is not run here).
const prometheusRules = `groups:
- name: kubelet.rules
  rules:
  - expr: histogram_quantile(0.99, sum(rate(kubelet_pleg_relist_duration_seconds_bucket{job="kubelet", metrics_path="/metrics"}[5m])) by (cluster, instance, le) * on(cluster, instance) group_left(node) kubelet_node_name{job="kubelet", metrics_path="/metrics"})
    labels: {quantile: "0.99"}
    record: node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile
- name: cadvisor.rules
  rules:
  - expr: sum by (cluster, namespace, pod, container) (irate(container_cpu_usage_seconds_total{job="kubelet", metrics_path="/metrics/cadvisor", image!=""}[5m]))
    record: namespace_pod_container:container_cpu_usage_seconds_total:sum_irate
`

// promQuery runs an instant query; it returns the series' values by the
// label key.
func promQuery(t *testing.T, base, q, key string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		return nil
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		out[s.Metric[key]] = v
	}
	return out
}

// TestPrometheusScrapesThroughNodeProxy runs a real Prometheus (built from
// the Go module proxy: Debian's package leaves kubernetes_sd out) with
// kube-prometheus's kubelet jobs: it discovers the node with
// kubernetes_sd, scrapes /metrics and /metrics/cadvisor through the API
// server's node proxy, both targets are up, and kube-prometheus's
// kubelet.rules recording rule evaluates (the PLEG relist p99 of the node),
// as does a cadvisor CPU rule that sees the burner's 200m.
func TestPrometheusScrapesThroughNodeProxy(t *testing.T) {
	const node = "e2e-prom"
	c, _ := clusterNode(t, node, "")
	bin := c.Env["PROMETHEUS_BIN"]
	if bin == "" {
		if framework.InCI() {
			t.Fatal(".stack/env lacks PROMETHEUS_BIN: hack/cluster/up.sh builds it")
		}
		t.Skip("Prometheus is not built (run make cluster-up)")
	}
	ns := c.Namespace(t, "prom")
	burner := busyboxPod("burner", node, `while :; do :; done`)
	burner.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
	createPods(t, c, ns, burner)
	waitPod(t, c, ns, "burner", 60*time.Second, "Running", podReady)

	dir := t.TempDir()
	jobs := fmt.Sprintf(prometheusJob, "metrics", "/metrics", c.PKI, node) + fmt.Sprintf(prometheusJob, "cadvisor", "/metrics/cadvisor", c.PKI, node)
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(prometheusConfig, jobs)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(prometheusRules), 0o644); err != nil {
		t.Fatal(err)
	}
	port := framework.FreePort(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	framework.Eventually(t, 60*time.Second, time.Second, func() bool {
		up := promQuery(t, base, `up{job="kubelet"}`, "metrics_path")
		return up["/metrics"] == 1 && up["/metrics/cadvisor"] == 1
	}, "both kubelet targets up through the node proxy")
	var pleg, cpu map[string]float64
	framework.Eventually(t, 60*time.Second, time.Second, func() bool {
		pleg = promQuery(t, base, `node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile{quantile="0.99"}`, "node")
		cpu = promQuery(t, base, `namespace_pod_container:container_cpu_usage_seconds_total:sum_irate{namespace="`+ns+`"}`, "pod")
		// NaN until the relist counter moved within the window (nodelet
		// relists every 10 s while the runtime's events work).
		p99, okPleg := pleg[node]
		return okPleg && !math.IsNaN(p99) && within(cpu["burner"], 0.2, 0.15)
	}, "the recording rules evaluate to figures")
	t.Logf("kubelet.rules: PLEG relist p99 of %s: %.4fs; cadvisor rule: burner %.3f cores", node, pleg[node], cpu["burner"])
	if pleg[node] <= 0 || pleg[node] > 1 {
		t.Errorf("PLEG relist p99 %v s", pleg[node])
	}
}
