package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

// harness holds what stays the same across agents.
type harness struct {
	o       *options
	env     map[string]string
	client  kubernetes.Interface
	rt      internalapi.RuntimeService
	floorRT internalapi.RuntimeService
	img     internalapi.ImageManagerService
	nodelet string // built binary
	host    *nodeagent.Host
	cleaner nodeagent.Cleaner

	mu    sync.Mutex
	agent *nodeagent.Proc
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
	host, err := nodeagent.SnapshotHost()
	if err != nil {
		return nil, err
	}
	h := &harness{o: o, env: env, client: client, rt: rt, floorRT: floorRT, img: img, host: host,
		cleaner: nodeagent.Cleaner{Client: client, Runtime: rt, Node: o.Node,
			Mine: func(ns string) bool { return strings.HasPrefix(ns, nsPrefix) }}}
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
	// (Its own deadline: a cold build of nodelet above takes longer than
	// the connections' 10 s.)
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	for _, ref := range []string{env["BUSYBOX_IMAGE"], env["PAUSE_IMAGE"]} {
		if _, err := img.PullImage(pctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil); err != nil {
			return nil, fmt.Errorf("pre-pull %s: %w", ref, err)
		}
	}
	return h, nil
}

func (h *harness) upstreamBinary() string { return filepath.Join(h.env["K8S_BIN"], "kubelet") }

// restoreHost puts back the sysctls and removes the iptables chains and
// files the upstream kubelet leaves; every agent is stopped by then.
func (h *harness) restoreHost() { h.host.Restore() }

func (h *harness) abort() {
	h.mu.Lock()
	a := h.agent
	h.mu.Unlock()
	if a != nil {
		h.stopAgent(a)
	}
	h.restoreHost()
}

// spec is how the benchmark runs agent name.
func (h *harness) spec(name string) nodeagent.Spec {
	maxPods := h.o.burst
	for _, n := range h.o.scale {
		maxPods = max(maxPods, n)
	}
	bin := h.nodelet
	if name == nodeagent.Upstream {
		bin = h.upstreamBinary()
	}
	return nodeagent.Spec{Name: name, Binary: bin, Node: h.o.Node, Env: h.env, MaxPods: maxPods + 10}
}

// config is the KubeletConfiguration both agents get.
func (h *harness) config(dir string) string { return nodeagent.Config(h.spec(nodeagent.Upstream), dir) }

// startAgent starts agent name on a fresh temp dir.
func (h *harness) startAgent(name string) (*nodeagent.Proc, error) {
	a, err := nodeagent.Start(h.spec(name))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.agent = a
	h.mu.Unlock()
	return a, nil
}

// stopAgent stops the agent cleanly.
func (h *harness) stopAgent(a *nodeagent.Proc) {
	a.Stop()
	h.mu.Lock()
	if h.agent == a {
		h.agent = nil
	}
	h.mu.Unlock()
}

// cleanNode removes everything an agent left (nodeagent.Cleaner.CleanNode).
func (h *harness) cleanNode(ctx context.Context, dir string) error {
	return h.cleaner.CleanNode(ctx, dir)
}

const nsPrefix = "cmp-"

// removeSandboxes stops and removes the sandboxes (and their containers) of
// the benchmark's namespaces, or of one namespace.
func (h *harness) removeSandboxes(ctx context.Context, ns string) error {
	return h.cleaner.RemoveSandboxes(ctx, ns)
}

// readySandboxes is the number of ready (not stopped) sandboxes of
// namespace ns in containerd.
func (h *harness) readySandboxes(ctx context.Context, ns string) int {
	return nodeagent.ReadySandboxes(ctx, h.rt, ns)
}

// waitNodeReady waits for the node's Ready condition.
func (h *harness) waitNodeReady(ctx context.Context, a *nodeagent.Proc, timeout time.Duration) error {
	return nodeagent.WaitNodeReady(ctx, h.client, h.o.Node, a, timeout)
}

// proc figures of one process.
type procSample struct {
	T      time.Time
	RSSKiB int64
	// AnonKiB and FileKiB split RSSKiB: anonymous memory (heap, stacks)
	// and the mapped pages of files (mostly the agent's own binary).
	AnonKiB, FileKiB int64
	CPU              float64 // utime+stime, seconds
}

func readProc(pid int) (procSample, error) {
	s := procSample{T: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			s.RSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "RssAnon:":
			s.AnonKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "RssFile:":
			s.FileKiB, _ = strconv.ParseInt(f[1], 10, 64)
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
	var sum, anon, file int64
	for _, p := range ps {
		sum += p.RSSKiB
		anon += p.AnonKiB
		file += p.FileKiB
		f.RSSMaxMiB = max(f.RSSMaxMiB, float64(p.RSSKiB)/1024)
	}
	f.RSSMeanMiB = float64(sum) / float64(len(ps)) / 1024
	f.AnonMeanMiB = float64(anon) / float64(len(ps)) / 1024
	f.FileMeanMiB = float64(file) / float64(len(ps)) / 1024
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
	log.Printf("%s: RSS %.1f MiB (anonymous %.1f, files %.1f), CPU %.2f s (%.2f %%)", what, f.RSSMeanMiB, f.AnonMeanMiB, f.FileMeanMiB, f.CPUSeconds, f.CPUPercent)
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
		case inKubepods(pid):
			// The containers' own processes: runc init does its setup
			// (namespaces, mounts, pivot_root) in the process that then
			// execs the container's command, so that work is theirs.
			out["containers"] += t.user + t.system
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
		// Time the hypervisor ran something else while this VM wanted
		// the CPU: machineBusy counts it as busy, no process of ours used it.
		if len(f) > 8 {
			x, _ := strconv.ParseFloat(f[8], 64)
			out["steal"] += x / 100
		}
	}
	return out
}

// inKubepods tells whether the process runs in a pod's cgroup.
func inKubepods(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(data), "kubepods")
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
