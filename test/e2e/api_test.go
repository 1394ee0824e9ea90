package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// apiPods creates the pods the kubelet API tests use and waits for them.
func apiPods(t *testing.T, c *framework.Cluster, ns, node string) {
	t.Helper()
	ctx := context.Background()
	logger := busyboxPod("logger", node, `i=0; while true; do i=$((i+1)); echo "line $i"; echo "err $i" >&2; sleep 0.2; done`)
	crasher := busyboxPod("crasher", node, `echo "run $(cat /proc/uptime)"; sleep 4; exit 3`)
	shell := busyboxPod("shell", node, `sleep 3600`)
	attacher := busyboxPod("attacher", node, `echo ready; while read l; do echo "got:$l"; done; sleep 3600`)
	attacher.Spec.Containers[0].Stdin = true
	web := busyboxPod("web", node, `mkdir -p /www && echo hello-port-forward > /www/index.html && exec httpd -f -p 8080 -h /www`)
	for _, p := range []*v1.Pod{logger, crasher, shell, attacher, web} {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"logger", "shell", "attacher", "web"} {
		waitPod(t, c, ns, name, 60*time.Second, "Running", func(p *v1.Pod) bool { return podReady(p) })
	}
}

// TestKubeletAPIThroughKubectl runs kubectl logs, exec, attach and
// port-forward through the API server against a nodelet node.
func TestKubeletAPIThroughKubectl(t *testing.T) {
	const node = "api-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "api")
	apiPods(t, c, ns, node)
	kubectl := func(args ...string) (string, error) {
		return c.KubectlOut(t, 30*time.Second, append([]string{"-n", ns}, args...)...)
	}
	time.Sleep(2 * time.Second) // a few lines of logs

	t.Run("logs", func(t *testing.T) {
		out, err := kubectl("logs", "logger")
		if err != nil || !strings.Contains(out, "line 1\n") || !strings.Contains(out, "err 1\n") {
			t.Fatalf("kubectl logs: %v\n%s", err, out)
		}
		out, err = kubectl("logs", "logger", "--tail=3")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 3 {
			t.Fatalf("kubectl logs --tail=3: want 3 lines, got %d (%v)\n%s", len(lines), err, out)
		}
		out, err = kubectl("logs", "logger", "--tail=2", "--timestamps")
		ts := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z (line|err) \d+$`)
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if err != nil || !ts.MatchString(l) {
				t.Fatalf("kubectl logs --timestamps: line %q (%v)", l, err)
			}
		}
		all, _ := kubectl("logs", "logger")
		recent, err := kubectl("logs", "logger", "--since=1s")
		if n, m := strings.Count(recent, "\n"), strings.Count(all, "\n"); err != nil || n == 0 || n >= m || n > 20 {
			t.Fatalf("kubectl logs --since=1s: %d lines of %d (%v)", n, m, err)
		}
		out, err = kubectl("logs", "logger", "--limit-bytes=10")
		if err != nil || len(out) != 10 {
			t.Fatalf("kubectl logs --limit-bytes=10: %q (%v)", out, err)
		}
	})

	t.Run("logs-follow", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := c.Kubectl(ctx, "-n", ns, "logs", "-f", "--tail=1", "logger")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		num := regexp.MustCompile(`^line (\d+)$`)
		var seen []string
		deadline := time.AfterFunc(15*time.Second, cancel)
		defer deadline.Stop()
		for sc.Scan() && len(seen) < 5 {
			if m := num.FindStringSubmatch(sc.Text()); m != nil {
				seen = append(seen, m[1])
			}
		}
		// New lines keep arriving while the container writes them.
		if len(seen) < 5 {
			t.Fatalf("kubectl logs -f: only %v arrived", seen)
		}
	})

	t.Run("logs-previous", func(t *testing.T) {
		p := waitPod(t, c, ns, "crasher", 60*time.Second, "restarted", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 &&
				p.Status.ContainerStatuses[0].State.Running != nil
		})
		last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.ExitCode != 3 {
			t.Fatalf("lastState: %+v", p.Status.ContainerStatuses[0].LastTerminationState)
		}
		prev, err := kubectl("logs", "crasher", "--previous")
		cur, err2 := kubectl("logs", "crasher")
		if err != nil || err2 != nil || !strings.HasPrefix(prev, "run ") || !strings.HasPrefix(cur, "run ") || prev == cur {
			t.Fatalf("--previous %q (%v), current %q (%v): want two different runs", prev, err, cur, err2)
		}
		out, err := kubectl("logs", "shell", "--previous")
		if err == nil || !strings.Contains(out, "previous terminated container") {
			t.Fatalf("--previous of a container that never restarted: %v %s", err, out)
		}
	})

	t.Run("exec", func(t *testing.T) {
		out, err := kubectl("exec", "shell", "--", "sh", "-c", "echo out; echo err >&2; cat /proc/1/cmdline")
		if err != nil || !strings.Contains(out, "out\n") || !strings.Contains(out, "err\n") || !strings.Contains(out, "sleep") {
			t.Fatalf("kubectl exec: %v\n%s", err, out)
		}
		_, err = kubectl("exec", "shell", "--", "sh", "-c", "exit 7")
		var ee *exec.ExitError
		if err == nil || !asExit(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("kubectl exec exit 7: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := c.Kubectl(ctx, "-n", ns, "exec", "-i", "shell", "--", "sh", "-c", "read a; read b; echo \"$b-$a\"")
		cmd.Stdin = strings.NewReader("one\ntwo\n")
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != "two-one" {
			t.Fatalf("kubectl exec -i: %v %q", err, got)
		}
		out, err = kubectl("exec", "shell", "-c", "nope", "--", "true")
		if err == nil {
			t.Fatalf("exec into a container that does not exist succeeded: %s", out)
		}
		var took []time.Duration
		for range 20 {
			start := time.Now()
			if out, err := kubectl("exec", "shell", "--", "true"); err != nil {
				t.Fatalf("kubectl exec true: %v %s", err, out)
			}
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("kubectl exec POD -- true: median %v, min %v, max %v (20 runs)", took[10].Round(time.Millisecond), took[0].Round(time.Millisecond), took[19].Round(time.Millisecond))
	})

	t.Run("attach", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := c.Kubectl(ctx, "-n", ns, "attach", "-i", "attacher")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		got := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "got:hello-attach" {
					got <- true
					return
				}
			}
		}()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-got:
				return
			case <-ctx.Done():
				t.Fatal("kubectl attach: the container never echoed our line")
			case <-tick.C:
				// The attach stream may not be up yet: send until echoed.
				_, _ = io.WriteString(stdin, "hello-attach\n")
			}
		}
	})

	t.Run("port-forward", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := c.Kubectl(ctx, "-n", ns, "port-forward", "pod/web", ":8080")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
		sc := bufio.NewScanner(stdout)
		port := ""
		for port == "" && sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				port = m[1]
			}
		}
		if port == "" {
			t.Fatal("kubectl port-forward did not start")
		}
		go func() {
			for sc.Scan() {
			}
		}()
		for i := range 2 { // two connections through the same forward
			resp, err := http.Get("http://127.0.0.1:" + port + "/index.html")
			if err != nil {
				t.Fatalf("request %d through port-forward: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.TrimSpace(string(body)) != "hello-port-forward" {
				t.Fatalf("through port-forward: %d %q", resp.StatusCode, body)
			}
		}
	})
}

func asExit(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	if ok {
		*target = ee
	}
	return ok
}

// saToken makes a service account in ns, optionally bound to a
// ClusterRole allowing verbs on the nodes subresources given, and returns a
// token for it.
func saToken(t *testing.T, c *framework.Cluster, ns, name string, subresources ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(subresources) > 0 {
		role := ns + "-" + name
		var res []string
		for _, s := range subresources {
			res = append(res, "nodes/"+s)
		}
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: res, Verbs: []string{"get", "create"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), role, metav1.DeleteOptions{})
			_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{})
		})
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestKubeletAPIAuthnAuthz calls the kubelet API directly: unauthenticated
// requests get 401; a token whose service account has no RBAC on the node
// gets 403; nodes/proxy allows the proxy paths, nodes/metrics and
// nodes/stats only their own; the API server's client certificate is let
// through by its SubjectAccessReview.
func TestKubeletAPIAuthnAuthz(t *testing.T) {
	const node = "authz-node"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "authz")
	nobody := saToken(t, c, ns, "nobody")
	proxy := saToken(t, c, ns, "proxy", "proxy")
	metricsOnly := saToken(t, c, ns, "metrics", "metrics", "stats")

	cases := []struct {
		name  string
		creds framework.APICredentials
		path  string
		want  int
	}{
		{"anonymous", framework.APICredentials{}, "/pods", http.StatusUnauthorized},
		{"bad token", framework.APICredentials{Token: "not-a-token"}, "/pods", http.StatusUnauthorized},
		{"no RBAC, proxy path", framework.APICredentials{Token: nobody}, "/runningpods/", http.StatusForbidden},
		{"no RBAC, metrics", framework.APICredentials{Token: nobody}, "/metrics", http.StatusForbidden},
		{"nodes/proxy, proxy path", framework.APICredentials{Token: proxy}, "/runningpods/", http.StatusOK},
		{"nodes/proxy, pods (fine-grained falls back to proxy)", framework.APICredentials{Token: proxy}, "/pods", http.StatusOK},
		{"nodes/proxy, metrics", framework.APICredentials{Token: proxy}, "/metrics", http.StatusForbidden},
		{"nodes/metrics, metrics", framework.APICredentials{Token: metricsOnly}, "/metrics", http.StatusOK},
		{"nodes/metrics, probes", framework.APICredentials{Token: metricsOnly}, "/metrics/probes", http.StatusOK},
		{"nodes/metrics, proxy path", framework.APICredentials{Token: metricsOnly}, "/runningpods/", http.StatusForbidden},
		{"API server's client certificate", framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/configz", http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := c.KubeletAPI(t, n, tc.creds, tc.path)
			if code != tc.want {
				t.Fatalf("GET %s: %d %q, want %d", tc.path, code, body, tc.want)
			}
		})
	}
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/configz")
	if !strings.Contains(body, `"kubeletconfig"`) || !strings.Contains(body, fmt.Sprintf(`"port":%d`, n.APIPort)) {
		t.Fatalf("/configz: %s", body)
	}
}

// TestKubeletAPIMetrics scrapes /metrics and /metrics/probes and parses
// them with the Prometheus text parser.
func TestKubeletAPIMetrics(t *testing.T) {
	const node = "metrics-node"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "metrics")
	p := busyboxPod("ready", node, `touch /tmp/ok; sleep 3600`)
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/ok"}}},
		PeriodSeconds: 1,
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "ready", 60*time.Second, "Ready", podReady)
	admin := framework.APICredentials{CertName: "apiserver-kubelet-client"}
	scrape := func(path string) map[string]*dto.MetricFamily {
		code, body := c.KubeletAPI(t, n, admin, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(body + "\n"))
		if err != nil {
			t.Fatalf("%s does not parse: %v", path, err)
		}
		return fams
	}
	var m map[string]*dto.MetricFamily
	// The running counts come from the last relist (every second, or on
	// the runtime's event): one may have seen the sandbox before the
	// container.
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
		m = scrape("/metrics")
		pods, running := false, false
		for _, mm := range m["kubelet_running_pods"].GetMetric() {
			pods = mm.GetGauge().GetValue() == 1
		}
		for _, mm := range m["kubelet_running_containers"].GetMetric() {
			running = running || matches(mm, map[string]string{"container_state": "running"})
		}
		return pods && running
	}, "kubelet_running_pods = 1 and a running container counted")
	gauge := func(name string, labels map[string]string) float64 {
		f := m[name]
		if f == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		for _, mm := range f.Metric {
			if matches(mm, labels) {
				if mm.Gauge != nil {
					return mm.Gauge.GetValue()
				}
				return mm.Counter.GetValue()
			}
		}
		t.Fatalf("/metrics has no %s%v", name, labels)
		return 0
	}
	if v := gauge("kubelet_node_name", map[string]string{"node": node}); v != 1 {
		t.Errorf("kubelet_node_name = %v", v)
	}
	if v := gauge("kubelet_running_pods", nil); v != 1 {
		t.Errorf("kubelet_running_pods = %v, want 1", v)
	}
	if v := gauge("kubelet_running_containers", map[string]string{"container_state": "running"}); v != 1 {
		t.Errorf("kubelet_running_containers{running} = %v, want 1", v)
	}
	if v := gauge("kubelet_runtime_operations_total", map[string]string{"operation_type": "run_podsandbox"}); v < 1 {
		t.Errorf("kubelet_runtime_operations_total{run_podsandbox} = %v", v)
	}
	if v := gauge("kubelet_started_containers_total", map[string]string{"container_type": "container"}); v < 1 {
		t.Errorf("kubelet_started_containers_total = %v", v)
	}
	for _, name := range []string{"kubelet_pod_start_duration_seconds", "kubelet_pod_worker_duration_seconds", "kubelet_pleg_relist_duration_seconds", "kubelet_runtime_operations_duration_seconds"} {
		f := m[name]
		if f == nil || len(f.Metric) == 0 || f.Metric[0].Histogram.GetSampleCount() == 0 {
			t.Errorf("%s has no samples", name)
		}
	}
	if gauge("process_resident_memory_bytes", nil) <= 0 || m["go_goroutines"] == nil {
		t.Error("process and Go metrics missing")
	}
	probes := scrape("/metrics/probes")
	total := probes["prober_probe_total"]
	found := false
	for _, mm := range total.GetMetric() {
		if matches(mm, map[string]string{"probe_type": "Readiness", "result": "successful", "pod": "ready", "namespace": ns, "container": "c"}) && mm.Counter.GetValue() >= 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("prober_probe_total has no successful readiness probe of ready/c: %v", total)
	}
}

// matches reports whether m has every label in want.
func matches(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
