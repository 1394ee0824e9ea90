// Package agent runs a node agent (nodelet or the upstream kubelet) joined
// to the stack's control plane, with the same KubeletConfiguration for
// both, and leaves the node clean after it: the side-by-side benchmark
// (bench/compare) and the conformance run (test/conformance) share it.
package agent

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// Upstream names the upstream kubelet; any other Spec.Name is a nodelet.
const Upstream = "upstream"

// Spec says which agent to run and how.
type Spec struct {
	Name   string // "upstream" or "nodelet"
	Binary string
	Node   string
	// Env is the stack's .stack/env (CLUSTER_PKI, NODE_IP,
	// CONTAINER_RUNTIME_ENDPOINT, STACK_DIR).
	Env     map[string]string
	MaxPods int
	// ExtraConfig is appended to the KubeletConfiguration (YAML fields).
	ExtraConfig string
	// Verbosity is -v (2 if 0).
	Verbosity int
	// RootDir is the agent's --root-dir (a folder of the agent's temp dir
	// if empty), e.g. a small filesystem of the caller's.
	RootDir string
	// ExtraArgs are appended to the agent's command line.
	ExtraArgs []string
	// ExtraEnv is added to the agent's environment (e.g. the system bus's
	// DBUS_SYSTEM_BUS_ADDRESS).
	ExtraEnv []string
	// Dir is the agent's folder (a fresh temp dir if empty): the same Dir
	// again starts the agent on what it left there (its root dir, logs).
	Dir string
	// Bootstrap joins with the stack's bootstrap token (TLS bootstrap):
	// --bootstrap-kubeconfig, and a --kubeconfig in the agent's dir still
	// to be written, with the certificates in its pki folder.
	Bootstrap bool
}

// Config is the KubeletConfiguration both agents get, with dir as the
// agent's own folder.
func Config(s Spec, dir string) string {
	pki := s.Env["CLUSTER_PKI"]
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
podLogsDir: %s
resolvConf: %s
failCgroupV1: false
cgroupDriver: cgroupfs
maxPods: %d
nodeLeaseDurationSeconds: 20
protectKernelDefaults: false
healthzBindAddress: 127.0.0.1
healthzPort: 10248
port: 10250
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  x509:
    clientCAFile: %s
  webhook:
    enabled: true
authorization:
  mode: Webhook
%s`, s.Env["CONTAINER_RUNTIME_ENDPOINT"], filepath.Join(dir, "pod-logs"), filepath.Join(dir, "resolv.conf"), s.MaxPods,
		filepath.Join(pki, "node-"+s.Node+"-serving.crt"), filepath.Join(pki, "node-"+s.Node+"-serving.key"),
		filepath.Join(pki, "ca.crt"), s.ExtraConfig)
}

// Proc is one running agent.
type Proc struct {
	Name string
	// Dir holds the agent's config, root dir, pod logs and its log.
	Dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start writes the agent's files under a fresh temp dir (pods get a
// resolv.conf with nameserver 127.0.0.1: nothing reaches the host's
// resolver), issues the node's certificates and starts the agent.
func Start(s Spec) (*Proc, error) {
	dir := s.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "agent-"+s.Name+"-"); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"root", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "kubelet-config.yaml")
	if err := os.WriteFile(cfg, []byte(Config(s, dir)), 0o644); err != nil {
		return nil, err
	}
	pki := s.Env["CLUSTER_PKI"]
	if _, err := Run(filepath.Join(s.Env["STACK_DIR"], "bin", "pki"), "node", "--dir", pki, "--name", s.Node, "--ip", s.Env["NODE_IP"]); err != nil {
		return nil, err
	}
	v := s.Verbosity
	if v == 0 {
		v = 2
	}
	root := s.RootDir
	if root == "" {
		root = filepath.Join(dir, "root")
	}
	kubeconfig := filepath.Join(pki, "node-"+s.Node+".kubeconfig")
	if s.Bootstrap {
		kubeconfig = filepath.Join(dir, "kubeconfig")
	}
	args := []string{
		"--config", cfg,
		"--kubeconfig", kubeconfig,
		"--root-dir", root,
		"--hostname-override", s.Node,
		"--node-ip", s.Env["NODE_IP"],
		"-v", fmt.Sprint(v),
	}
	if s.Name == Upstream || s.Bootstrap {
		args = append(args, "--cert-dir", filepath.Join(dir, "pki"))
	}
	if s.Bootstrap {
		args = append(args, "--bootstrap-kubeconfig", s.Env["BOOTSTRAP_KUBECONFIG"])
	}
	args = append(args, s.ExtraArgs...)
	f, err := os.OpenFile(filepath.Join(dir, s.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.Binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), s.ExtraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &Proc{Name: s.Name, Dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.exited) }()
	log.Printf("%s started (pid %d), files in %s", s.Name, cmd.Process.Pid, dir)
	return p, nil
}

// Stop stops the agent cleanly (SIGTERM, then SIGKILL after 20 s).
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		log.Printf("%s did not stop on SIGTERM: SIGKILL", p.Name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Kill kills the agent (SIGKILL: a crash) and waits for it to be gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Pid is the agent's process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the agent's process is gone.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// LogPath is the agent's log file.
func (p *Proc) LogPath() string { return filepath.Join(p.Dir, p.Name+".log") }

// WaitNodeReady waits for the node's Ready condition without the
// not-ready and unreachable taints.
func WaitNodeReady(ctx context.Context, c kubernetes.Interface, node string, p *Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited; log in %s", p.Name, p.LogPath())
		default:
		}
		if n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil && nodeReady(n) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready after %v; log in %s", node, timeout, p.LogPath())
}

func nodeReady(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable" {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Cleaner removes what an agent left on the node.
type Cleaner struct {
	Client  kubernetes.Interface
	Runtime internalapi.RuntimeService
	Node    string
	// Mine tells the namespaces whose pods, and sandboxes in the runtime,
	// are the caller's to remove.
	Mine func(namespace string) bool
}

// CleanNode removes everything an agent left: the caller's namespaces and
// pods, the Node and its Lease, every sandbox and container of those
// namespaces in the runtime, mounts under dir (if given) and the kubepods
// cgroups. It returns once the Node is gone.
func (cl Cleaner) CleanNode(ctx context.Context, dir string) error {
	c := cl.Client
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		if !cl.Mine(ns.Name) {
			continue
		}
		_ = c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	}
	if err := c.CoreV1().Nodes().Delete(ctx, cl.Node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_ = c.CoordinationV1().Leases("kube-node-lease").Delete(ctx, cl.Node, metav1.DeleteOptions{})
	if err := cl.RemoveSandboxes(ctx, ""); err != nil {
		return err
	}
	if dir != "" {
		framework.UnmountUnder(dir, log.Printf)
	}
	RemoveKubepods()
	// The node must be gone before the next agent registers.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.CoreV1().Nodes().Get(ctx, cl.Node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s still there", cl.Node)
}

// RemoveSandboxes stops and removes the sandboxes (and their containers)
// of the caller's namespaces, or of one namespace.
func (cl Cleaner) RemoveSandboxes(ctx context.Context, ns string) error {
	// The agent may be removing the same sandboxes (containerd then says
	// "already in removing state"): try again until none is left.
	var errs []string
	removed := 0
	for try := 0; try < 20; try++ {
		n, e, err := cl.removeSandboxesOnce(ctx, ns)
		if err != nil {
			return err
		}
		removed += n
		if errs = e; len(errs) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove sandboxes: %s", strings.Join(errs, "; "))
	}
	if removed > 0 {
		log.Printf("removed %d sandboxes left in the runtime", removed)
	}
	return nil
}

func (cl Cleaner) removeSandboxesOnce(ctx context.Context, ns string) (int, []string, error) {
	boxes, err := cl.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	mine := map[string]bool{}
	for _, b := range boxes {
		bns := b.GetMetadata().GetNamespace()
		if (ns == "" && cl.Mine(bns)) || (ns != "" && bns == ns) {
			mine[b.Id] = true
		}
	}
	cs, err := cl.Runtime.ListContainers(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	for _, c := range cs {
		if mine[c.PodSandboxId] {
			_ = cl.Runtime.StopContainer(ctx, c.Id, 0)
			_ = cl.Runtime.RemoveContainer(ctx, c.Id)
		}
	}
	var errs []string
	removed := 0
	for id := range mine {
		_ = cl.Runtime.StopPodSandbox(ctx, id)
		if err := cl.Runtime.RemovePodSandbox(ctx, id); err != nil {
			errs = append(errs, err.Error())
		} else {
			removed++
		}
	}
	return removed, errs, nil
}

// ReadySandboxes is the number of ready (not stopped) sandboxes of
// namespace ns in the runtime, -1 if the runtime cannot say.
func ReadySandboxes(ctx context.Context, rt internalapi.RuntimeService, ns string) int {
	boxes, err := readyBoxes(ctx, rt, ns)
	if err != nil {
		return -1
	}
	return len(boxes)
}

// ReadySandboxPods is the set of pod names of namespace ns with a ready
// sandbox in containerd.
func ReadySandboxPods(ctx context.Context, rt internalapi.RuntimeService, ns string) (map[string]bool, error) {
	boxes, err := readyBoxes(ctx, rt, ns)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(boxes))
	for _, b := range boxes {
		out[b.GetMetadata().GetName()] = true
	}
	return out, nil
}

// readyBoxes lists the ready sandboxes of namespace ns.
func readyBoxes(ctx context.Context, rt internalapi.RuntimeService, ns string) ([]*runtimeapi.PodSandbox, error) {
	return rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
}
