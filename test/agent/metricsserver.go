package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MetricsServer is metrics-server (METRICS_SERVER_BIN, built by
// hack/cluster/metrics-server-build.sh) running on the host for the test
// control plane, behind the aggregated API v1beta1.metrics.k8s.io: a
// selector-less Service kube-system/metrics-server whose Endpoints are
// NODE_IP and its port (the API server routes to endpoints,
// --enable-aggregator-routing). It checks the kubelets' serving
// certificates against the cluster CA (no --kubelet-insecure-tls).
type MetricsServer struct {
	Dir     string
	kubectl []string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartMetricsServer starts it with the stack's env and registers its API.
func StartMetricsServer(env map[string]string) (*MetricsServer, error) {
	bin, pki, ip := env["METRICS_SERVER_BIN"], env["CLUSTER_PKI"], env["NODE_IP"]
	if bin == "" || pki == "" || ip == "" {
		return nil, fmt.Errorf(".stack/env lacks METRICS_SERVER_BIN, CLUSTER_PKI or NODE_IP: run make cluster-up")
	}
	dir, err := os.MkdirTemp("", "metrics-server")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f, err := os.Create(filepath.Join(dir, "metrics-server.log"))
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(pki, "admin.kubeconfig")
	m := &MetricsServer{Dir: dir, kubectl: []string{env["KUBECTL"], "--kubeconfig", kubeconfig}, done: make(chan struct{})}
	m.cmd = exec.Command(bin,
		"--secure-port="+strconv.Itoa(port), "--bind-address="+ip, "--cert-dir="+filepath.Join(dir, "certs"),
		"--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--kubelet-preferred-address-types=InternalIP", "--kubelet-use-node-status-port", "--metric-resolution=10s", "--kubelet-request-timeout=5s",
		"--kubelet-certificate-authority="+filepath.Join(pki, "ca.crt"),
		"--kubelet-client-certificate="+filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+filepath.Join(pki, "apiserver-kubelet-client.key"))
	m.cmd.Stdout, m.cmd.Stderr = f, f
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = m.cmd.Wait(); f.Close(); close(m.done) }()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system}
spec:
  ports: [{name: https, port: 443, targetPort: %[1]d}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: metrics-server, namespace: kube-system}
subsets:
- addresses: [{ip: %[2]s}]
  ports: [{name: https, port: %[1]d}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  service: {name: metrics-server, namespace: kube-system, port: 443}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
`, port, ip)
	if out, err := m.run(manifest, "apply", "-f", "-"); err != nil {
		m.Stop()
		return nil, fmt.Errorf("registering metrics-server: %v\n%s", err, out)
	}
	return m, nil
}

func (m *MetricsServer) run(stdin string, args ...string) (string, error) {
	cmd := exec.Command(m.kubectl[0], append(m.kubectl[1:], args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Top runs kubectl top with args (e.g. "node", NAME or "pod", "-n", NS).
func (m *MetricsServer) Top(args ...string) (string, error) {
	return m.run("", append([]string{"top"}, args...)...)
}

// Log is what metrics-server logged.
func (m *MetricsServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.Dir, "metrics-server.log"))
	return string(b)
}

// Stop unregisters the API first (an aggregated API that does not answer
// stalls discovery, namespace deletion among others), then stops the
// process.
func (m *MetricsServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []string{"apiservice/v1beta1.metrics.k8s.io", "-n kube-system service/metrics-server", "-n kube-system endpoints/metrics-server"} {
		args := append([]string{"delete", "--ignore-not-found", "--wait=false"}, strings.Fields(o)...)
		_ = exec.CommandContext(ctx, m.kubectl[0], append(m.kubectl[1:], args...)...).Run()
	}
	select {
	case <-m.done:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		<-m.done
	}
	_ = os.RemoveAll(m.Dir)
}
