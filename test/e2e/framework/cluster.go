package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Cluster is the local control plane that `make cluster-up` starts.
type Cluster struct {
	*Stack
	Client    kubernetes.Interface
	PKI       string
	AuditLog  string
	K8sBin    string
	clientErr error
}

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
)

// RequireCluster returns the control plane, starting it (and the stack) with
// hack/cluster/up.sh when needed. The first run builds the control plane from
// the Go module proxy (minutes). It fails the test in CI and skips it
// elsewhere when the control plane cannot be had.
func RequireCluster(t testing.TB) *Cluster {
	t.Helper()
	s := RequireStack(t)
	clusterOnce.Do(func() { cluster, clusterErr = startCluster(s) })
	if clusterErr != nil {
		if InCI() {
			t.Fatalf("the control plane is required: %v", clusterErr)
		}
		t.Skipf("the control plane is not available (run `make cluster-up` as root): %v", clusterErr)
	}
	return cluster
}

func startCluster(s *Stack) (*Cluster, error) {
	// up.sh is idempotent: it starts only what does not run.
	cmd := exec.Command("bash", filepath.Join(s.RepoRoot, "hack", "cluster", "up.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hack/cluster/up.sh: %w", err)
	}
	env, err := ReadEnvFile(filepath.Join(s.RepoRoot, ".stack", "env"))
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	s.Env = env
	return &Cluster{Stack: s, Client: client, PKI: env["CLUSTER_PKI"], AuditLog: env["AUDIT_LOG"], K8sBin: env["K8S_BIN"]}, nil
}

// NewClusterNodelet prepares a nodelet that joins the cluster as node name:
// it mints the node's certificates and writes a kubeconfig. The Node object
// and the test's pods are deleted when the test ends.
func NewClusterNodelet(t testing.TB, c *Cluster, name string) *Nodelet {
	t.Helper()
	pki := filepath.Join(c.RepoRoot, ".stack", "bin", "pki")
	out, err := exec.Command(pki, "node", "--dir", c.PKI, "--name", name, "--ip", c.NodeIP).CombinedOutput()
	if err != nil {
		t.Fatalf("pki node: %v\n%s", err, out)
	}
	n := NewNodelet(t, c.Stack, name)
	n.ExtraArgs = append(n.ExtraArgs, "--kubeconfig", filepath.Join(c.PKI, "node-"+name+".kubeconfig"))
	n.AppendConfig(fmt.Sprintf("tlsCertFile: %s\ntlsPrivateKeyFile: %s\nauthentication:\n  x509:\n    clientCAFile: %s\n",
		filepath.Join(c.PKI, "node-"+name+"-serving.crt"), filepath.Join(c.PKI, "node-"+name+"-serving.key"), filepath.Join(c.PKI, "ca.crt")))
	c.cleanupNode(t, n, name)
	return n
}

// NewBootstrapNodelet prepares a nodelet that joins the cluster as node
// name with the bootstrap token alone, as kubeadm join does:
// --bootstrap-kubeconfig is the cluster's, --kubeconfig a file still to be
// written (Nodelet.Kubeconfig), the certificates go to Nodelet.CertDir.
// The Node object and the test's pods are deleted when the test ends.
func NewBootstrapNodelet(t testing.TB, c *Cluster, name string) *Nodelet {
	t.Helper()
	if c.Env["BOOTSTRAP_KUBECONFIG"] == "" {
		t.Fatal(".stack/env lacks BOOTSTRAP_KUBECONFIG: run hack/cluster/up.sh")
	}
	n := NewNodelet(t, c.Stack, name)
	n.Kubeconfig = filepath.Join(filepath.Dir(n.RootDir), "kubeconfig")
	n.CertDir = filepath.Join(filepath.Dir(n.RootDir), "pki")
	n.ExtraArgs = append(n.ExtraArgs, "--kubeconfig", n.Kubeconfig, "--bootstrap-kubeconfig", c.Env["BOOTSTRAP_KUBECONFIG"], "--cert-dir", n.CertDir)
	n.AppendConfig(fmt.Sprintf("authentication:\n  x509:\n    clientCAFile: %s\n", filepath.Join(c.PKI, "ca.crt")))
	c.cleanupNode(t, n, name)
	return n
}

// cleanupNode deletes the node's pods and Node when the test ends.
func (c *Cluster) cleanupNode(t testing.TB, n *Nodelet, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Pods bound to the node go first: deleted in the API, so the nodelet
		// (if it still runs) stops them, then removed from containerd.
		var uids []string
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err == nil {
			for _, p := range pods.Items {
				uids = append(uids, string(p.UID))
				_ = c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for _, uid := range uids {
			for n.Pid() != 0 && time.Now().Before(deadline) && len(c.sandboxesOf(uid)) > 0 {
				time.Sleep(200 * time.Millisecond)
			}
			for _, id := range c.sandboxesOf(uid) {
				_ = c.Runtime.StopPodSandbox(ctx, id)
				_ = c.Runtime.RemovePodSandbox(ctx, id)
			}
		}
		if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("cleanup: delete node %s: %v", name, err)
		}
	})
}

func (c *Cluster) sandboxesOf(uid string) []string {
	boxes, err := c.Runtime.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
	})
	if err != nil {
		return nil
	}
	var ids []string
	for _, b := range boxes {
		ids = append(ids, b.Id)
	}
	return ids
}

// AppendConfig adds lines to the nodelet's KubeletConfiguration file.
func (n *Nodelet) AppendConfig(lines string) {
	n.t.Helper()
	f, err := os.OpenFile(n.ConfigFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(lines); err != nil {
		n.t.Fatal(err)
	}
}

// Namespace creates a namespace for the test (deleted at its end) and waits
// for its default service account.
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, "default service account in %s", ns.Name)
	return ns.Name
}

// NodeReady returns the node's Ready condition status ("" when unknown).
func (c *Cluster) NodeReady(t testing.TB, name string) v1.ConditionStatus {
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// Pod gets a pod, failing the test on error.
func (c *Cluster) Pod(t testing.TB, ns, name string) *v1.Pod {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return p
}

// StopAPIServer kills kube-apiserver (SIGKILL, by its PID file).
func (c *Cluster) StopAPIServer(t testing.TB) {
	t.Helper()
	pidFile := filepath.Join(c.RepoRoot, ".stack", "cluster", "run", "kube-apiserver.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatal(err)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = proc.Signal(syscall.SIGKILL) // an abrupt outage
	Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		return proc.Signal(syscall.Signal(0)) != nil
	}, "kube-apiserver stopped")
	// Whatever happens in the test, the API server comes back for the next.
	t.Cleanup(func() { c.StartAPIServer(t) })
}

// StartAPIServer starts whatever of the control plane is not running.
func (c *Cluster) StartAPIServer(t testing.TB) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(c.RepoRoot, "hack", "cluster", "up.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/cluster/up.sh: %v", err)
	}
	c.waitControllers(t)
}

// waitControllers waits until the controller manager acts on the API
// server again (a new namespace gets its default service account): after
// an API server restart its informers take a while to come back, and the
// next test's pods need that account.
func (c *Cluster) waitControllers(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "controllers-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) }()
	Eventually(t, 2*time.Minute, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, "the controller manager back after the API server's restart (default service account in %s)", ns.Name)
}
