// Command pressure runs the node-pressure scenario of the pressure issue
// against nodelet and the upstream kubelet, one after the other, as node
// bench-pressure of the stack's control plane, with the same
// KubeletConfiguration:
//
//   - memory: the pods' cgroup (under cgroupRoot /bench-pressure) is
//     limited to 1 GiB by systemReserved; the hard memory.available
//     threshold of 300Mi gives its allocatableMemory.available twin on
//     that cgroup. A BestEffort hog grows ~75 MiB/s towards 1.5 GiB: it
//     crosses the threshold at 724 MiB and meets the kernel's OOM killer at
//     1 GiB unless the agent evicts it first (10 runs by default);
//   - disk: the agent's root directory is a 512 MiB ext4 loop mount with
//     nodefs.available 200Mi; a pod writes 20 MiB/s into an emptyDir;
//   - inodes: the same filesystem has 6000 inodes, nodefs.inodesFree 2000;
//     a pod creates 500 empty files a second;
//   - pids: pid.available 300 below what the machine has; a pod forks 100
//     sleeps a second (podPidsLimit 1000 bounds it).
//
// For each run it records when the signal crossed the threshold (its own
// sampler, every 20 ms, reading what the agents read), when the API showed
// the node's pressure condition True, when it showed the pod Failed with
// reason Evicted, and the OOM kills in the pods' cgroup meanwhile. It
// writes the runs as JSON and a Markdown section with both agents' figures.
//
//	go run ./bench/pressure -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
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
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	cgroupRoot = "/bench-pressure"
	// podsLimit is the pods' cgroup's memory limit (capacity minus
	// systemReserved) and memThreshold the hard memory.available one.
	podsLimit    = 1 << 30
	memThreshold = 300 << 20
	diskMiB      = 512
	diskFree     = 200 << 20
	inodes       = 6000
	inodesFree   = 2000
	pidHeadroom  = 300
	nsPrefix     = "prs-"
)

// Run is one run of one signal.
type Run struct {
	Signal string `json:"signal"`
	// Seconds from the threshold crossed (the sampler) to the API showing
	// the condition True and the pod evicted; -1: never.
	ToCondition float64 `json:"toConditionSeconds"`
	ToEviction  float64 `json:"toEvictionSeconds"`
	// OOMKills during the run (the kernel's oom_kill count).
	OOMKills int64 `json:"oomKills"`
	// LimitHits: how often the pods' cgroup's usage hit its limit
	// (memory.failcnt): the kernel reclaiming or OOM-killing in it.
	LimitHits int64 `json:"limitHits"`
	// Outcome: "evicted" (before the pods' cgroup reached its limit),
	// "oom-killed", "limit" (at the limit, neither killed nor evicted in
	// time: the kernel reclaiming), "evicted-at-limit", "none".
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
}

// AgentResult is one agent's runs.
type AgentResult struct {
	Agent string `json:"agent"`
	Runs  []Run  `json:"runs"`
}

// Results is the file -out holds.
type Results struct {
	Date    string         `json:"date"`
	Machine string         `json:"machine"`
	Agents  []*AgentResult `json:"agents"`
}

type options struct {
	*benchkit.Program
	memoryRuns int
	runs       int
	report     bool
}

func main() {
	o := options{Program: benchkit.New("pressure", "bench-pressure")}
	o.Namespaces = nsPrefix
	flag.IntVar(&o.memoryRuns, "memory-runs", 10, "runs of the memory hog")
	flag.IntVar(&o.runs, "runs", 3, "runs of the disk, inode and PID scenarios")
	flag.BoolVar(&o.report, "report-only", false, "only rewrite the section from -out")
	o.Parse()
	if o.report {
		var res Results
		if err := o.LoadResults(&res); err != nil {
			log.Fatal(err)
		}
		if err := o.WriteSection(section(&res)); err != nil {
			log.Fatal(err)
		}
		return
	}
	if os.Geteuid() != 0 {
		log.Fatal("pressure needs root (it runs node agents and mounts filesystems)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.event_control"); err != nil {
		log.Fatal("the scenario reads cgroup v1 memory files: ", err)
	}
	b, err := o.Prepare()
	if err != nil {
		log.Fatal(err)
	}
	h := &harness{Bench: b, o: &o}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		log.Print("interrupted: stopping the agent")
		h.abort()
		os.Exit(2)
	}()
	res := &Results{Date: time.Now().UTC().Format("2006-01-02"), Machine: machine()}
	for _, name := range o.Agents {
		r, err := h.runAgent(context.Background(), name)
		if err != nil {
			h.abort()
			log.Fatalf("%s: %v", name, err)
		}
		res.Agents = append(res.Agents, r)
		// Each agent's runs are kept as soon as they exist.
		if err := o.SaveResults(res); err != nil {
			log.Fatal(err)
		}
	}
	h.Close()
	if err := o.Write(res, section(res)); err != nil {
		log.Fatal(err)
	}
}

func machine() string {
	out, _ := nodeagent.Run("sh", "-c", "echo $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, kernel $(uname -r)")
	return strings.TrimSpace(out)
}

type harness struct {
	*benchkit.Bench
	o *options

	mu    sync.Mutex
	agent *nodeagent.Proc
	mnt   string
}

func (h *harness) abort() {
	h.mu.Lock()
	a, mnt := h.agent, h.mnt
	h.mu.Unlock()
	if a != nil {
		a.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Cleaner.CleanNode(ctx, mnt); err != nil {
		log.Printf("cleanup: %v", err)
	}
	if mnt != "" {
		framework.UnmountUnder(mnt, log.Printf)
		_, _ = nodeagent.Run("umount", "-l", mnt)
	}
	nodeagent.RemoveCgroups(cgroupRoot)
	h.Close()
}

// makeCgroupRoot creates cgroupRoot in every cgroup hierarchy.
func makeCgroupRoot() error {
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range ents {
		dir := filepath.Join("/sys/fs/cgroup", e.Name())
		if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, cgroupRoot), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// makeRootFS mounts a fresh ext4 of diskMiB with the scenario's inodes at
// a temp dir: the agent's root directory.
func makeRootFS() (string, func(), error) {
	dir, err := os.MkdirTemp("/var/tmp", "bench-pressure-")
	if err != nil {
		return "", nil, err
	}
	img, mnt := filepath.Join(dir, "root.ext4"), filepath.Join(dir, "root")
	cleanup := func() {
		framework.UnmountUnder(mnt, log.Printf)
		// The upstream kubelet bind-mounts its root directory onto itself
		// (rshared): as many unmounts as there are mounts there.
		for i := 0; i < 5 && mounted(mnt); i++ {
			if _, err := nodeagent.Run("umount", mnt); err != nil {
				log.Printf("umount %s: %v (detaching it)", mnt, err)
				_, _ = nodeagent.Run("umount", "-l", mnt)
			}
		}
		_ = os.RemoveAll(dir)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", nil, err
	}
	if _, err := nodeagent.Run("truncate", "-s", fmt.Sprintf("%dM", diskMiB), img); err != nil {
		return "", nil, err
	}
	if _, err := nodeagent.Run("mkfs.ext4", "-q", "-F", "-m", "0", "-N", strconv.Itoa(inodes), img); err != nil {
		return "", nil, err
	}
	if _, err := nodeagent.Run("mount", "-o", "loop", img, mnt); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	return mnt, cleanup, nil
}

// mounted tells whether something is mounted at dir (/proc/mounts).
func mounted(dir string) bool {
	data, _ := os.ReadFile("/proc/mounts")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}

// config is the scenario's KubeletConfiguration fields (both agents).
func config(pidThreshold int64) string {
	return fmt.Sprintf(`cgroupRoot: %s
systemReserved:
  memory: "%d"
podPidsLimit: 1000
evictionHard:
  memory.available: "%d"
  nodefs.available: "%d"
  nodefs.inodesFree: "%d"
  pid.available: "%d"
evictionPressureTransitionPeriod: 10s
`, cgroupRoot, memTotal()-podsLimit, memThreshold, diskFree, inodesFree, pidThreshold)
}

func (h *harness) runAgent(ctx context.Context, name string) (*AgentResult, error) {
	log.Printf("=== %s", name)
	if err := makeCgroupRoot(); err != nil {
		return nil, err
	}
	mnt, unmount, err := makeRootFS()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.mnt = mnt
	h.mu.Unlock()
	defer func() {
		unmount()
		nodeagent.RemoveCgroups(cgroupRoot)
		h.mu.Lock()
		h.mnt = ""
		h.mu.Unlock()
	}()
	pidMax, procs := pidFigures()
	spec := h.Spec(name)
	spec.RootDir, spec.ExtraConfig = mnt, config(pidMax-procs-pidHeadroom)
	a, err := nodeagent.Start(spec)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.agent = a
	h.mu.Unlock()
	stop := func() {
		a.Stop()
		h.mu.Lock()
		h.agent = nil
		h.mu.Unlock()
		h.Clean(ctx, mnt)
	}
	defer stop()
	if err := nodeagent.WaitNodeReady(ctx, h.Client, h.Node, a, 2*time.Minute); err != nil {
		return nil, err
	}
	ns := nsPrefix + name
	if err := h.namespace(ctx, ns); err != nil {
		return nil, err
	}
	// Both agents get the same time to settle after registering (the
	// upstream kubelet's stats start with cAdvisor's first housekeeping).
	log.Printf("%s is Ready: 30 s to settle", name)
	time.Sleep(30 * time.Second)
	res := &AgentResult{Agent: name}
	kubepods := filepath.Join(cgroupRoot, "kubepods")
	scenarios := []struct {
		signal string
		runs   int
		cond   v1.NodeConditionType
		script string
		volume bool
		cross  func() (bool, error)
	}{
		{"memory", h.o.memoryRuns, v1.NodeMemoryPressure, hogScript(1500), false, func() (bool, error) {
			ws, err := workingSet(kubepods)
			return ws > podsLimit-memThreshold, err
		}},
		{"disk", h.o.runs, v1.NodeDiskPressure,
			"i=0; while [ $i -lt 40 ]; do dd if=/dev/zero of=/data/f$i bs=1M count=10 2>/dev/null; sleep 0.5; i=$((i+1)); done; sleep 3600", true,
			func() (bool, error) {
				var st syscall.Statfs_t
				err := syscall.Statfs(mnt, &st)
				return int64(st.Bavail)*st.Bsize < diskFree, err
			}},
		{"inodes", h.o.runs, v1.NodeDiskPressure,
			"i=0; while [ $i -lt 5000 ]; do : > /data/f$i; i=$((i+1)); if [ $((i % 100)) = 0 ]; then sleep 0.2; fi; done; sleep 3600", true,
			func() (bool, error) {
				var st syscall.Statfs_t
				err := syscall.Statfs(mnt, &st)
				return int64(st.Ffree) < inodesFree, err
			}},
		{"pids", h.o.runs, v1.NodePIDPressure,
			"i=0; while [ $i -lt 600 ]; do sleep 3600 & i=$((i+1)); if [ $((i % 20)) = 0 ]; then sleep 0.2; fi; done; wait", false,
			func() (bool, error) {
				_, n := pidFigures()
				return pidMax-n < pidMax-procs-pidHeadroom, nil
			}},
	}
	for _, sc := range scenarios {
		for i := 0; i < sc.runs; i++ {
			pod := h.pod(fmt.Sprintf("%s-%d", sc.signal, i), sc.script, sc.volume)
			r, err := h.run(ctx, ns, pod, sc.signal, sc.cond, sc.cross, kubepods)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", sc.signal, i, err)
			}
			log.Printf("%s %s run %d: %s, crossed -> condition %.2f s, -> evicted %.2f s, OOM kills %d, limit hits %d", name, sc.signal, i, r.Outcome, r.ToCondition, r.ToEviction, r.OOMKills, r.LimitHits)
			res.Runs = append(res.Runs, r)
		}
	}
	return res, nil
}

// namespace creates ns and waits for its default service account.
func (h *harness) namespace(ctx context.Context, ns string) error {
	// One left by an earlier run may still be terminating.
	for i := 0; ; i++ {
		got, err := h.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := h.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err == nil && got.DeletionTimestamp == nil {
			break
		}
		if i > 600 {
			return fmt.Errorf("namespace %s: still terminating (%v)", ns, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := 0; i < 300; i++ {
		if _, err := h.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s has no default service account", ns)
}

// hogScript grows a process's memory by 10 MiB every 0.1 s (busybox tail
// holding a line that never ends) up to mib MiB, then holds it; the
// container ends if tail is killed (the OOM killer's victim).
func hogScript(mib int) string {
	return fmt.Sprintf("(i=0; while [ $i -lt %d ]; do head -c 10485760 /dev/zero || exit 1; sleep 0.1; i=$((i+1)); done; sleep 3600) | tail >/dev/null", mib/10)
}

// pod is a BestEffort busybox pod on the node running script, with an
// emptyDir at /data if volume.
func (h *harness) pod(name, script string, volume bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:                      h.Node,
			RestartPolicy:                 v1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers:                    []v1.Container{{Name: "c", Image: h.Env["BUSYBOX_IMAGE"], Command: []string{"sh", "-c", script}}},
		},
	}
	if volume {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	return p
}

// run creates the pod and follows it until it has failed (evicted or
// killed), then removes it and waits for the pressure to clear.
func (h *harness) run(ctx context.Context, ns string, pod *v1.Pod, sig string, cond v1.NodeConditionType, crossed func() (bool, error), kubepods string) (Run, error) {
	r := Run{Signal: sig, ToCondition: -1, ToEviction: -1, Outcome: "none"}
	// Any pressure left from the previous run would refuse the pod.
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if err := h.waitCondition(ctx, c, v1.ConditionFalse, 2*time.Minute); err != nil {
			return r, fmt.Errorf("before the run: %w", err)
		}
	}
	oomBefore, failBefore := oomKills(), failcnt(kubepods)
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	defer h.removePod(ctx, ns, pod.Name)
	// The sampler: the first time the signal is past its threshold.
	var mu sync.Mutex
	var crossedAt time.Time
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if ok, err := crossed(); err == nil && ok {
				mu.Lock()
				crossedAt = time.Now()
				mu.Unlock()
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var condAt, evictedAt time.Time
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if condAt.IsZero() {
			if n, err := h.Client.CoreV1().Nodes().Get(ctx, h.Node, metav1.GetOptions{}); err == nil {
				for _, c := range n.Status.Conditions {
					if c.Type == cond && c.Status == v1.ConditionTrue {
						condAt = time.Now()
					}
				}
			}
		}
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodFailed {
			r.Message = p.Status.Message
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" && r.Message == "" {
					r.Message = "container OOMKilled"
				}
			}
			if p.Status.Reason == "Evicted" {
				evictedAt = time.Now()
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A condition seen later than the pod's end still counts.
	for i := 0; condAt.IsZero() && i < 150; i++ {
		if n, err := h.Client.CoreV1().Nodes().Get(ctx, h.Node, metav1.GetOptions{}); err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == cond && c.Status == v1.ConditionTrue {
					condAt = time.Now()
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.OOMKills, r.LimitHits = oomKills()-oomBefore, failcnt(kubepods)-failBefore
	mu.Lock()
	at := crossedAt
	mu.Unlock()
	if at.IsZero() {
		return r, fmt.Errorf("the signal never crossed its threshold (the pod: %q)", r.Message)
	}
	if !condAt.IsZero() {
		r.ToCondition = condAt.Sub(at).Seconds()
	}
	if !evictedAt.IsZero() {
		r.ToEviction = evictedAt.Sub(at).Seconds()
	}
	switch {
	case r.OOMKills > 0:
		r.Outcome = "oom-killed"
	case !evictedAt.IsZero() && r.LimitHits > 0:
		r.Outcome = "evicted-at-limit"
	case !evictedAt.IsZero():
		r.Outcome = "evicted"
	case r.LimitHits > 0:
		r.Outcome = "limit"
	}
	return r, nil
}

// removePod deletes the pod and waits for it to be gone from the API and
// the runtime.
func (h *harness) removePod(ctx context.Context, ns, name string) {
	_ = h.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	for i := 0; i < 600; i++ {
		_, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && nodeagent.ReadySandboxes(ctx, h.Runtime, ns) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Printf("pod %s/%s still there after 60 s", ns, name)
}

func (h *harness) waitCondition(ctx context.Context, typ v1.NodeConditionType, st v1.ConditionStatus, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if n, err := h.Client.CoreV1().Nodes().Get(ctx, h.Node, metav1.GetOptions{}); err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == typ && c.Status == st {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node condition %s never %s", typ, st)
}

// memTotal is the machine's memory (MemTotal), the agents' capacity.
func memTotal() int64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// workingSet is a v1 memory cgroup's working set: usage minus the
// hierarchical inactive file pages, as both agents compute it.
func workingSet(cg string) (int64, error) {
	dir := filepath.Join("/sys/fs/cgroup/memory", cg)
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	usage, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "total_inactive_file" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return max(usage-v, 0), nil
		}
	}
	return usage, nil
}

// failcnt is the v1 memory cgroup's memory.failcnt: how often its usage
// hit the limit.
func failcnt(cg string) int64 {
	b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cg, "memory.failcnt"))
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// oomKills is the kernel's count of OOM kills (/proc/vmstat oom_kill):
// cgroup v1 counts a kill in the victim's own memory cgroup only, which
// goes with its container, so the machine-wide counter is read instead
// (nothing else on the machine is near an OOM kill during a run).
func oomKills() int64 {
	data, _ := os.ReadFile("/proc/vmstat")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// pidFigures are the PID limit (the lower of pid_max and threads-max) and
// the number of tasks (/proc/loadavg), as both agents read pid.available.
func pidFigures() (limit, tasks int64) {
	read := func(path string) int64 {
		b, _ := os.ReadFile(path)
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	limit = min(read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max"))
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 3 {
		_, total, _ := strings.Cut(f[3], "/")
		tasks, _ = strconv.ParseInt(total, 10, 64)
	}
	return limit, tasks
}

// median of the values >= 0 (never-happened runs left out), -1 if none.
func median(vs []float64) float64 {
	var ok []float64
	for _, v := range vs {
		if v >= 0 {
			ok = append(ok, v)
		}
	}
	if len(ok) == 0 {
		return -1
	}
	sort.Float64s(ok)
	if len(ok)%2 == 1 {
		return ok[len(ok)/2]
	}
	return (ok[len(ok)/2-1] + ok[len(ok)/2]) / 2
}
