package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// The sysctls the upstream kubelet sets at start unless
// protectKernelDefaults (pkg/kubelet/cm/container_manager_linux.go).
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// harness holds what stays the same across agents.
type harness struct {
	o       *options
	env     map[string]string
	client  kubernetes.Interface
	rt      internalapi.RuntimeService
	floorRT internalapi.RuntimeService
	img     internalapi.ImageManagerService
	nodelet string // built binary
	sysctls map[string]string
	host    hostState

	mu    sync.Mutex
	agent *agentProc
}

// agentProc is one running agent.
type agentProc struct {
	name   string
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

func newHarness(o *options, env map[string]string) (*harness, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return nil, err
	}
	// Creating 500 pods at once must not be throttled on our side.
	rc.QPS, rc.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(env["CONTAINER_RUNTIME_ENDPOINT"]).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, err
	}
	// The floor bursts wait as long as the agents would (runtimeRequestTimeout).
	floorRT, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(env["CONTAINER_RUNTIME_ENDPOINT"]).
		WithConnectionTimeout(2 * time.Minute).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, err
	}
	img, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(env["CONTAINER_RUNTIME_ENDPOINT"]).
		WithConnectionTimeout(5 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return nil, err
	}
	h := &harness{o: o, env: env, client: client, rt: rt, floorRT: floorRT, img: img, sysctls: map[string]string{}, host: snapshotHost()}
	for _, k := range kubeletSysctls {
		out, err := run("sysctl", "-n", k)
		if err != nil {
			return nil, err
		}
		h.sysctls[k] = strings.TrimSpace(out)
	}
	bin, err := os.MkdirTemp("", "compare-bin-")
	if err != nil {
		return nil, err
	}
	h.nodelet = filepath.Join(bin, "nodelet")
	log.Print("building nodelet")
	if _, err := run("go", "build", "-o", h.nodelet, "./cmd/nodelet"); err != nil {
		return nil, err
	}
	if _, err := os.Stat(h.upstreamBinary()); err != nil {
		return nil, fmt.Errorf("upstream kubelet: %w (hack/cluster/build.sh builds it)", err)
	}
	// Images pre-pulled: the burst measures the agents, not the registry.
	for _, ref := range []string{env["BUSYBOX_IMAGE"], env["PAUSE_IMAGE"]} {
		if _, err := img.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
			return nil, fmt.Errorf("pre-pull %s: %w", ref, err)
		}
	}
	return h, nil
}

func (h *harness) upstreamBinary() string { return filepath.Join(h.env["K8S_BIN"], "kubelet") }

// restoreHost puts back the sysctls and removes the iptables chains and
// files the upstream kubelet leaves; every agent is stopped by then.
func (h *harness) restoreHost() {
	h.restoreSysctls()
	restoreHost(h.host)
}

func (h *harness) restoreSysctls() {
	for _, k := range kubeletSysctls {
		if v := h.sysctls[k]; v != "" {
			if _, err := run("sysctl", "-q", "-w", k+"="+v); err != nil {
				log.Printf("restore %s: %v", k, err)
			}
		}
	}
}

func (h *harness) abort() {
	h.mu.Lock()
	a := h.agent
	h.mu.Unlock()
	if a != nil {
		h.stopAgent(a)
	}
	h.restoreHost()
}

// config is the KubeletConfiguration both agents get.
func (h *harness) config(dir string) string {
	pki := h.env["CLUSTER_PKI"]
	maxPods := h.o.burst
	for _, n := range h.o.scale {
		maxPods = max(maxPods, n)
	}
	maxPods += 10
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
`, h.env["CONTAINER_RUNTIME_ENDPOINT"], filepath.Join(dir, "pod-logs"), filepath.Join(dir, "resolv.conf"), maxPods,
		filepath.Join(pki, "node-"+h.o.nodeName+"-serving.crt"), filepath.Join(pki, "node-"+h.o.nodeName+"-serving.key"),
		filepath.Join(pki, "ca.crt"))
}

// startAgent writes the agent's files under a fresh temp dir and starts it.
func (h *harness) startAgent(name string) (*agentProc, error) {
	dir, err := os.MkdirTemp("", "compare-"+name+"-")
	if err != nil {
		return nil, err
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
	if err := os.WriteFile(cfg, []byte(h.config(dir)), 0o644); err != nil {
		return nil, err
	}
	pki := h.env["CLUSTER_PKI"]
	if _, err := run(filepath.Join(".stack", "bin", "pki"), "node", "--dir", pki, "--name", h.o.nodeName, "--ip", h.env["NODE_IP"]); err != nil {
		return nil, err
	}
	bin := h.nodelet
	if name == "upstream" {
		bin = h.upstreamBinary()
	}
	args := []string{
		"--config", cfg,
		"--kubeconfig", filepath.Join(pki, "node-"+h.o.nodeName+".kubeconfig"),
		"--root-dir", filepath.Join(dir, "root"),
		"--hostname-override", h.o.nodeName,
		"--node-ip", h.env["NODE_IP"],
		"-v", "2",
	}
	if name == "upstream" {
		args = append(args, "--cert-dir", filepath.Join(dir, "pki"))
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &agentProc{name: name, cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(a.exited) }()
	h.mu.Lock()
	h.agent = a
	h.mu.Unlock()
	log.Printf("%s started (pid %d), files in %s", name, cmd.Process.Pid, dir)
	return a, nil
}

// stopAgent stops the agent cleanly (SIGTERM, then SIGKILL after 20 s).
func (h *harness) stopAgent(a *agentProc) {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		log.Printf("%s did not stop on SIGTERM: SIGKILL", a.name)
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	h.mu.Lock()
	if h.agent == a {
		h.agent = nil
	}
	h.mu.Unlock()
}

func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// cleanNode removes everything an agent left: the Node and its Lease, the
// benchmark's namespaces and pods, every sandbox and container of them in
// containerd, mounts under the agent's dir and the kubepods cgroups.
func (h *harness) cleanNode(ctx context.Context, dir string) error {
	c := h.client
	nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, nsPrefix) {
			continue
		}
		_ = c.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	}
	if err := c.CoreV1().Nodes().Delete(ctx, h.o.nodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_ = c.CoordinationV1().Leases("kube-node-lease").Delete(ctx, h.o.nodeName, metav1.DeleteOptions{})
	if err := h.removeSandboxes(ctx, ""); err != nil {
		return err
	}
	if dir != "" {
		framework.UnmountUnder(dir, log.Printf)
	}
	removeKubepods()
	// The node must be gone before the next agent registers.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.CoreV1().Nodes().Get(ctx, h.o.nodeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s still there", h.o.nodeName)
}

const nsPrefix = "cmp-"

// removeSandboxes stops and removes the sandboxes (and their containers) of
// the benchmark's namespaces, or of one namespace.
func (h *harness) removeSandboxes(ctx context.Context, ns string) error {
	// The agent may be removing the same sandboxes (containerd then says
	// "already in removing state"): try again until none is left.
	var errs []string
	removed := 0
	for try := 0; try < 20; try++ {
		n, e, err := h.removeSandboxesOnce(ctx, ns)
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
		log.Printf("removed %d sandboxes left in containerd", removed)
	}
	return nil
}

// removeSandboxesOnce stops and removes the sandboxes of ns (all of the
// benchmark's namespaces if ns is empty) and their containers; it returns
// how many it removed and what failed.
func (h *harness) removeSandboxesOnce(ctx context.Context, ns string) (int, []string, error) {
	boxes, err := h.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	mine := map[string]bool{}
	for _, b := range boxes {
		bns := b.GetMetadata().GetNamespace()
		if (ns == "" && strings.HasPrefix(bns, nsPrefix)) || (ns != "" && bns == ns) {
			mine[b.Id] = true
		}
	}
	cs, err := h.rt.ListContainers(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	for _, c := range cs {
		if mine[c.PodSandboxId] {
			_ = h.rt.StopContainer(ctx, c.Id, 0)
			_ = h.rt.RemoveContainer(ctx, c.Id)
		}
	}
	var errs []string
	removed := 0
	for id := range mine {
		_ = h.rt.StopPodSandbox(ctx, id)
		if err := h.rt.RemovePodSandbox(ctx, id); err != nil {
			errs = append(errs, err.Error())
		} else {
			removed++
		}
	}
	return removed, errs, nil
}

// readySandboxes is the number of ready (not stopped) sandboxes of
// namespace ns in containerd.
func (h *harness) readySandboxes(ctx context.Context, ns string) int {
	boxes, err := h.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return -1
	}
	return len(boxes)
}

// removeKubepods removes /sys/fs/cgroup/*/kubepods, deepest first (rmdir
// only: a cgroup with processes stays, and is reported).
func removeKubepods() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
				log.Printf("cleanup: rmdir %s: %v", d, err)
			}
		}
	}
}

// waitNodeReady waits for the node's Ready condition.
func (h *harness) waitNodeReady(ctx context.Context, a *agentProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-a.exited:
			return fmt.Errorf("%s exited; log in %s", a.name, a.dir)
		default:
		}
		n, err := h.client.CoreV1().Nodes().Get(ctx, h.o.nodeName, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
					ready := true
					for _, t := range n.Spec.Taints {
						if t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable" {
							ready = false
						}
					}
					if ready {
						return nil
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready after %v; log in %s", h.o.nodeName, timeout, a.dir)
}

// proc figures of one process.
type procSample struct {
	T      time.Time
	RSSKiB int64
	CPU    float64 // utime+stime, seconds
}

func readProc(pid int) (procSample, error) {
	s := procSample{T: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			s.RSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	t, err := procTimes(pid)
	if err != nil {
		return s, err
	}
	s.CPU = t.user + t.system
	return s, nil
}

// times is what /proc/PID/stat says of a process: its parent and its CPU
// seconds, its own and those of the children it reaped.
type times struct {
	ppid                                 int
	user, system, childUser, childSystem float64
}

func procTimes(pid int) (times, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return times{}, err
	}
	// Fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	sec := func(i int) float64 {
		v, _ := strconv.ParseFloat(f[i], 64)
		return v / 100 // USER_HZ
	}
	ppid, _ := strconv.Atoi(f[1])
	return times{ppid: ppid, user: sec(11), system: sec(12), childUser: sec(13), childSystem: sec(14)}, nil
}

// sampler records the agent's RSS and CPU every 250 ms.
type sampler struct {
	mu      sync.Mutex
	samples []procSample
	stop    chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			if p, err := readProc(pid); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, p)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// between returns the samples in [from, to].
func (s *sampler) between(from, to time.Time) []procSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []procSample
	for _, p := range s.samples {
		if !p.T.Before(from) && !p.T.After(to) {
			out = append(out, p)
		}
	}
	return out
}

// footprint summarises samples: CPU seconds used, RSS mean and max (MiB).
func footprint(ps []procSample) Footprint {
	if len(ps) < 2 {
		return Footprint{}
	}
	f := Footprint{Seconds: ps[len(ps)-1].T.Sub(ps[0].T).Seconds(), CPUSeconds: ps[len(ps)-1].CPU - ps[0].CPU}
	var sum int64
	for _, p := range ps {
		sum += p.RSSKiB
		f.RSSMaxMiB = max(f.RSSMaxMiB, float64(p.RSSKiB)/1024)
	}
	f.RSSMeanMiB = float64(sum) / float64(len(ps)) / 1024
	f.RSSEndMiB = float64(ps[len(ps)-1].RSSKiB) / 1024
	if f.Seconds > 0 {
		f.CPUPercent = 100 * f.CPUSeconds / f.Seconds
	}
	return f
}

// measureWindow waits out the window and returns the agent's footprint in it.
func (h *harness) measureWindow(s *sampler, what string) Footprint {
	log.Printf("%s: measuring %v", what, h.o.window)
	from := time.Now()
	time.Sleep(h.o.window)
	f := footprint(s.between(from, time.Now()))
	log.Printf("%s: RSS %.1f MiB, CPU %.2f s (%.2f %%)", what, f.RSSMeanMiB, f.CPUSeconds, f.CPUPercent)
	return f
}

// otherPids finds containerd (the stack's) and kube-apiserver, whose CPU
// during a burst tells where the time goes.
func (h *harness) otherPids() map[string]int {
	out := map[string]int{}
	if data, err := os.ReadFile(filepath.Join(h.env["STACK_DIR"], "containerd", "containerd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			out["containerd"] = pid
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager"} {
		if data, err := os.ReadFile(filepath.Join(h.env["STACK_DIR"], "cluster", "run", name+".pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
				out[name] = pid
			}
		}
	}
	return out
}

// groupCPU sums CPU seconds of processes the per-agent lists do not
// name: every containerd-shim with the children it reaped (runc), the
// children containerd reaped (CNI plugins), kernel threads, this program,
// and the machine's interrupt time. Shims and kernel threads outlive a
// burst, so differences of these sums are their work in it.
func groupCPU(containerdPid int) map[string]float64 {
	out := map[string]float64{}
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := procTimes(pid)
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		switch {
		case strings.HasPrefix(string(comm), "containerd-shim"):
			out["containerd-shims"] += t.user + t.system + t.childUser + t.childSystem
		case pid == containerdPid:
			out["containerd-children"] += t.childUser + t.childSystem
		case pid == 2 || t.ppid == 2:
			out["kernel-threads"] += t.user + t.system
		case pid == self:
			out["benchmark"] += t.user + t.system
		}
	}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		for _, i := range []int{6, 7} { // irq, softirq
			x, _ := strconv.ParseFloat(f[i], 64)
			out["irq"] += x / 100
		}
	}
	return out
}

// settle drops the caches (see dropCaches), then waits until the machine
// is quiet (under 0.6 of a core busy and the host's network interfaces
// unchanged over each of two consecutive seconds, at most two minutes):
// removing the previous pods leaves
// containerd collecting snapshots and the kernel destroying network
// namespaces (and their veths, under the lock every CNI ADD needs) for
// seconds after the sandboxes are gone, which would otherwise land in the
// next measurement of whichever agent runs then.
func settle() {
	dropCaches()
	start := time.Now()
	quiet := 0
	for quiet < 2 && time.Since(start) < 2*time.Minute {
		b, links := machineBusy(), hostLinks()
		time.Sleep(time.Second)
		if machineBusy()-b < 0.6 && hostLinks() == links {
			quiet++
		} else {
			quiet = 0
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		log.Printf("waited %.0f s for the machine to settle", d.Seconds())
	}
}

// hostLinks is how many network interfaces the host has.
func hostLinks() int {
	ents, _ := os.ReadDir("/sys/class/net")
	return len(ents)
}

// machineBusy is the CPU seconds all CPUs spent not idle (/proc/stat).
func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	var busy float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / 100
}
