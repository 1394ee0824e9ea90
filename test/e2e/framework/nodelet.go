package framework

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Nodelet is one nodelet process under test with its private directories.
type Nodelet struct {
	// Kubeconfig and CertDir: a bootstrapping nodelet's (NewBootstrapNodelet).
	Kubeconfig, CertDir string
	t                   testing.TB
	Stack               *Stack
	NodeName            string
	// ManifestDir is the static pod directory.
	ManifestDir string
	RootDir     string
	LogsDir     string
	ConfigFile  string
	HealthzPort int
	// APIPort is the kubelet API's port (HTTPS).
	APIPort int
	// ExtraArgs are appended to every start; Env to its environment.
	ExtraArgs []string
	Env       []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	logFile string
	exited  chan struct{}
	starts  int
}

// NewNodelet prepares (does not start) a nodelet for node name; its pods are
// removed from containerd when the test ends.
func NewNodelet(t testing.TB, s *Stack, name string) *Nodelet {
	t.Helper()
	dir := t.TempDir()
	n := &Nodelet{
		t: t, Stack: s, NodeName: name,
		ManifestDir: filepath.Join(dir, "manifests"),
		RootDir:     filepath.Join(dir, "root"),
		LogsDir:     filepath.Join(dir, "pod-logs"),
		ConfigFile:  filepath.Join(dir, "kubelet-config.yaml"),
		HealthzPort: freePort(t),
		APIPort:     freePort(t),
	}
	for _, d := range []string{n.ManifestDir, n.RootDir, n.LogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	resolv := filepath.Join(dir, "resolv.conf")
	// Pods never query the host's resolver.
	writeFile(t, resolv, "nameserver 127.0.0.1\n")
	writeFile(t, n.ConfigFile, fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
fileCheckFrequency: 5s
syncFrequency: 30s
containerRuntimeEndpoint: %s
podLogsDir: %s
healthzBindAddress: 127.0.0.1
healthzPort: %d
port: %d
resolvConf: %s
# This host is cgroup v1: run on it (upstream's default refuses, as nodelet's).
failCgroupV1: false
# Renew the lease every 5 s: the test control plane marks a node Unknown
# after 10 s without renewal (upstream's default grace is 50 s).
nodeLeaseDurationSeconds: 20
`, n.ManifestDir, s.RuntimeEndpoint, n.LogsDir, n.HealthzPort, n.APIPort, resolv))
	t.Cleanup(func() {
		n.Stop()
		RemovePodsOfNode(t, s, name)
		// Volumes of pods the stopped nodelet did not get to tear down.
		UnmountUnder(dir, t.Logf)
		if t.Failed() {
			n.DumpLog()
		}
	})
	return n
}

// Start starts the nodelet process.
func (n *Nodelet) Start() {
	n.t.Helper()
	bin := NodeletBinary(n.t)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.starts++
	n.logFile = filepath.Join(filepath.Dir(n.RootDir), fmt.Sprintf("nodelet-%d.log", n.starts))
	f, err := os.Create(n.logFile)
	if err != nil {
		n.t.Fatal(err)
	}
	args := append([]string{
		"--config", n.ConfigFile,
		"--root-dir", n.RootDir,
		"--hostname-override", n.NodeName,
		"--node-ip", n.Stack.NodeIP,
		"-v", "2",
	}, n.ExtraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), n.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
	n.cmd, n.exited = cmd, exited
}

// Kill kills the nodelet with SIGKILL, leaving its pods running.
func (n *Nodelet) Kill() { n.signal(syscall.SIGKILL) }

// Stop stops the nodelet with SIGTERM (pods keep running).
func (n *Nodelet) Stop() { n.signal(syscall.SIGTERM) }

func (n *Nodelet) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Pid is the running process's PID, or 0.
func (n *Nodelet) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Log returns what every nodelet process of this test logged so far.
func (n *Nodelet) Log() string {
	var b bytes.Buffer
	for i := 1; i <= n.starts; i++ {
		data, _ := os.ReadFile(filepath.Join(filepath.Dir(n.RootDir), fmt.Sprintf("nodelet-%d.log", i)))
		b.Write(data)
	}
	return b.String()
}

// DumpLog writes the nodelet log to the test log.
func (n *Nodelet) DumpLog() {
	log := n.Log()
	full := filepath.Join(os.TempDir(), "nodelet-failed-"+n.NodeName+".log")
	if err := os.WriteFile(full, []byte(log), 0o644); err == nil {
		n.t.Logf("full nodelet log: %s", full)
	}
	if len(log) > 20000 {
		log = "...\n" + log[len(log)-20000:]
	}
	n.t.Logf("nodelet log:\n%s", log)
}

// Healthz GETs /healthz and returns the status code and body.
func (n *Nodelet) Healthz() (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz?verbose", n.HealthzPort))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), nil
}

// WriteManifest writes a static pod manifest atomically (write, rename).
func (n *Nodelet) WriteManifest(name, content string) {
	n.t.Helper()
	tmp := filepath.Join(n.ManifestDir, "."+name+".tmp")
	writeFile(n.t, tmp, content)
	if err := os.Rename(tmp, filepath.Join(n.ManifestDir, name)); err != nil {
		n.t.Fatal(err)
	}
}

// RemoveManifest deletes a manifest.
func (n *Nodelet) RemoveManifest(name string) {
	n.t.Helper()
	if err := os.Remove(filepath.Join(n.ManifestDir, name)); err != nil {
		n.t.Fatal(err)
	}
}

// PodName is the name a static pod called name gets on this node.
func (n *Nodelet) PodName(name string) string { return name + "-" + n.NodeName }

// RemovePodsOfNode stops and removes every sandbox of pods named *-<node>.
func RemovePodsOfNode(t testing.TB, s *Stack, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boxes, err := s.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, b := range boxes {
		if !strings.HasSuffix(b.GetMetadata().GetName(), "-"+node) {
			continue
		}
		_ = s.Runtime.StopPodSandbox(ctx, b.Id)
		if err := s.Runtime.RemovePodSandbox(ctx, b.Id); err != nil {
			t.Logf("cleanup: remove sandbox %s: %v", b.Id, err)
		}
	}
}

// Sandboxes lists the sandboxes of the pod with this full name.
func (s *Stack) Sandboxes(t testing.TB, podName string) []*runtimeapi.PodSandbox {
	t.Helper()
	boxes, err := s.Runtime.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": podName},
	})
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	return boxes
}

// Containers lists the containers of the pod with this full name, and of one
// container name if given.
func (s *Stack) Containers(t testing.TB, podName, container string) []*runtimeapi.Container {
	t.Helper()
	sel := map[string]string{"io.kubernetes.pod.name": podName}
	if container != "" {
		sel["io.kubernetes.container.name"] = container
	}
	cs, err := s.Runtime.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return cs
}

// ContainerStatus returns one container's full status.
func (s *Stack) ContainerStatus(t testing.TB, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := s.Runtime.ContainerStatus(context.Background(), id, false)
	if err != nil {
		t.Fatalf("container status %s: %v", id, err)
	}
	return resp.Status
}

// RunningContainer returns the running container named container of the
// pod, or nil.
func (s *Stack) RunningContainer(t testing.TB, podName, container string) *runtimeapi.Container {
	for _, c := range s.Containers(t, podName, container) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c
		}
	}
	return nil
}

// Eventually polls cond every interval until it returns true or timeout
// passes, then fails the test with msg.
func Eventually(t testing.TB, timeout, interval time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: "+msg, append([]any{timeout}, args...)...)
		}
		time.Sleep(interval)
	}
}

// UnmountUnder detaches every mount below dir, deepest first (volumes of
// pods an agent did not get to tear down), reporting failures to logf.
func UnmountUnder(dir string, logf func(format string, args ...any)) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			logf("cleanup: unmount %s: %v", m, err)
		}
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort(t testing.TB) int { return freePort(t) }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Itoa is strconv.Itoa, for building manifests.
func Itoa(i int) string { return strconv.Itoa(i) }

// Exited tells whether the last process started has exited by itself.
func (n *Nodelet) Exited() bool {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return true
	default:
		return false
	}
}
