package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

// podState is what the watch saw of one pod.
type podState struct {
	created   time.Time // the create call's return
	scheduled time.Time // first event with the pod bound to a node
	acked     time.Time // first event with a status from the agent (startTime set)
	running   time.Time // first event: Running with every container started
	ready     time.Time // first event: Ready
	deleted   time.Time // Deleted event
	restarts  int32
	// restartedAt is the first event showing restarts > restartBase with the
	// container running again.
	restartBase int32
	restartedAt time.Time
	containerID string
}

// tracker follows the pods of one namespace through a watch.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*podState
}

func (h *harness) watchNamespace(ctx context.Context, ns string) (*tracker, error) {
	tr := &tracker{pods: map[string]*podState{}}
	list, err := h.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	rv := list.ResourceVersion
	started := make(chan error, 1)
	go func() {
		first := true
		for ctx.Err() == nil {
			w, err := h.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if first {
				started <- err
				first = false
			}
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				p, ok := ev.Object.(*v1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type == watch.Bookmark {
					continue
				}
				tr.observe(now, ev.Type, p)
			}
		}
	}()
	return tr, <-started
}

func (tr *tracker) get(name string) *podState {
	s := tr.pods[name]
	if s == nil {
		s = &podState{}
		tr.pods[name] = s
	}
	return s
}

func (tr *tracker) observe(now time.Time, typ watch.EventType, p *v1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := tr.get(p.Name)
	if typ == watch.Deleted {
		if s.deleted.IsZero() {
			s.deleted = now
		}
		return
	}
	if p.Spec.NodeName != "" && s.scheduled.IsZero() {
		s.scheduled = now
	}
	if p.Status.StartTime != nil && s.acked.IsZero() {
		s.acked = now
	}
	started := len(p.Status.ContainerStatuses) == len(p.Spec.Containers)
	var restarts int32
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil || c.Started == nil || !*c.Started {
			started = false
		}
		restarts += c.RestartCount
		if c.ContainerID != "" {
			s.containerID = c.ContainerID
		}
	}
	s.restarts = restarts
	if p.Status.Phase == v1.PodRunning && started {
		if s.running.IsZero() {
			s.running = now
		}
		if restarts > s.restartBase && s.restartedAt.IsZero() && s.restartBase >= 0 {
			s.restartedAt = now
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue && s.ready.IsZero() {
			s.ready = now
		}
	}
}

func (tr *tracker) snapshot(name string) podState {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return *tr.get(name)
}

// waitAll waits until cond holds for every pod named.
func (tr *tracker) waitAll(names []string, timeout time.Duration, what string, cond func(*podState) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		tr.mu.Lock()
		missing := 0
		for _, n := range names {
			if !cond(tr.get(n)) {
				missing++
			}
		}
		tr.mu.Unlock()
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods not %s after %v", missing, len(names), what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reset forgets pods (before a name is reused).
func (tr *tracker) reset(names []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, n := range names {
		delete(tr.pods, n)
	}
}

func podNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// benchPod is a busybox pod with tiny requests. trap: its shell exits on
// SIGTERM (for deletion with the default grace period). direct: created with
// spec.nodeName set (no scheduler in the path); otherwise a node selector
// for kube-scheduler.
func (h *harness) benchPod(name string, trap, direct bool) *v1.Pod {
	cmd := []string{"sleep", "3600"}
	var grace *int64
	if trap {
		cmd = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}
	} else {
		zero := int64(0)
		grace = &zero
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": h.o.Node},
			TerminationGracePeriodSeconds: grace,
			EnableServiceLinks:            new(bool),
			Containers: []v1.Container{{
				Name: "c", Image: h.env["BUSYBOX_IMAGE"], Command: cmd,
				ImagePullPolicy: v1.PullIfNotPresent,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("1m"),
					v1.ResourceMemory: resource.MustParse("4Mi"),
				}},
			}},
		},
	}
	if direct {
		p.Spec.NodeSelector = nil
		p.Spec.NodeName = h.o.Node
	}
	return p
}

// createAll creates the pods at once (one goroutine each) and records each
// create call's return time as the pod's start.
func (h *harness) createAll(ctx context.Context, ns string, tr *tracker, names []string, trap, direct bool) error {
	tr.reset(names)
	return forEach(names, func(n string) error {
		if _, err := h.client.CoreV1().Pods(ns).Create(ctx, h.benchPod(n, trap, direct), metav1.CreateOptions{}); err != nil {
			return err
		}
		now := time.Now()
		tr.mu.Lock()
		tr.get(n).created = now
		tr.mu.Unlock()
		return nil
	})
}

// forEach runs f for every name at once (one goroutine each) and returns
// one of the errors.
func forEach(names []string, f func(string) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// deleteAll deletes the pods at once; grace nil is the pod's own.
func (h *harness) deleteAll(ctx context.Context, ns string, names []string, grace *int64) error {
	return forEach(names, func(n string) error {
		if err := h.client.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: grace}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// clearPods deletes the pods with grace 0 and waits until they are gone from
// the API and their sandboxes from containerd, so the next measurement
// starts from an empty node.
func (h *harness) clearPods(ctx context.Context, ns string, tr *tracker, names []string) error {
	if err := h.deleteAll(ctx, ns, names, new(int64)); err != nil {
		return err
	}
	if err := tr.waitAll(names, 3*time.Minute, "deleted", func(s *podState) bool { return !s.deleted.IsZero() }); err != nil {
		return err
	}
	// Wait until every sandbox of the namespace is stopped, then remove the
	// stopped ones: the upstream kubelet leaves them to its container GC
	// (once a minute), nodelet removes them itself; either way the next
	// measurement starts with an empty runtime.
	deadline := time.Now().Add(3 * time.Minute)
	for h.readySandboxes(ctx, ns) != 0 {
		if time.Now().After(deadline) {
			log.Printf("%d sandboxes of %s still ready in containerd", h.readySandboxes(ctx, ns), ns)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return h.removeSandboxes(ctx, ns)
}

// burst creates n pods at once and measures them up to Running and Ready;
// direct: with spec.nodeName set (no scheduler).
func (h *harness) burst(ctx context.Context, a *nodeagent.Proc, s *sampler, ns string, tr *tracker, prefix string, n int, direct bool) (*Burst, error) {
	names := podNames(prefix, n)
	settle()
	others := h.otherPids()
	before := map[string]float64{}
	for k, pid := range others {
		if p, err := readProc(pid); err == nil {
			before[k] = p.CPU
		}
	}
	groupsBefore, busyBefore := groupCPU(others["containerd"]), machineBusy()
	log.Printf("burst of %d pods (%s, direct %v)", n, prefix, direct)
	auditFrom := h.auditOffset()
	criBefore := h.criCalls()
	start := time.Now()
	if err := h.createAll(ctx, ns, tr, names, false, direct); err != nil {
		return nil, err
	}
	created := time.Now()
	if err := tr.waitAll(names, h.o.burstWait, "Running and Ready", func(s *podState) bool {
		return !s.running.IsZero() && !s.ready.IsZero()
	}); err != nil {
		return nil, err
	}
	end := time.Now()
	b := &Burst{Pods: n, Direct: direct, CreateSeconds: created.Sub(start).Seconds(), OtherCPUSeconds: map[string]float64{}}
	var lastRunning time.Time
	for _, name := range names {
		st := tr.snapshot(name)
		b.RunningMs = append(b.RunningMs, ms(st.running.Sub(st.created)))
		b.ReadyMs = append(b.ReadyMs, ms(st.ready.Sub(st.created)))
		if st.running.After(lastRunning) {
			lastRunning = st.running
		}
	}
	sort.Float64s(b.RunningMs)
	sort.Float64s(b.ReadyMs)
	b.Running = stats(b.RunningMs)
	b.Ready = stats(b.ReadyMs)
	b.AllRunningSeconds = lastRunning.Sub(start).Seconds()
	// The footprint during the burst, and the RSS curve from its start to
	// 5 s after the last pod was Ready.
	time.Sleep(5 * time.Second)
	ps := s.between(start, end)
	b.Footprint = footprint(ps)
	for _, p := range s.between(start, time.Now()) {
		b.RSSCurve = append(b.RSSCurve, [2]float64{p.T.Sub(start).Seconds(), float64(p.RSSKiB) / 1024})
	}
	for k, pid := range others {
		if p, err := readProc(pid); err == nil {
			b.OtherCPUSeconds[k] = p.CPU - before[k]
		}
	}
	for k, v := range groupCPU(others["containerd"]) {
		b.OtherCPUSeconds[k] = v - groupsBefore[k]
	}
	b.OtherCPUSeconds["machine"] = machineBusy() - busyBefore
	b.OtherCPUSeconds["window"] = time.Since(start).Seconds()
	// The API requests of the agent from the first create to 5 s after the
	// last pod was Ready (the node's lease and status included, a handful).
	b.API = h.apiRequests(auditFrom, start, time.Now())
	// The CRI calls of the same window, before breakdown makes its own.
	b.CRI = criDiff(criBefore, h.criCalls())
	b.Breakdown = h.breakdown(ctx, ns, tr, names)
	log.Printf("burst %s: running p50 %.0f p99 %.0f max %.0f ms, ready p50 %.0f ms, all running %.2f s, CPU %.2f s, RSS max %.1f MiB, API writes %v (status %v, events %v, tokens %v), reads %v, CRI calls %v",
		prefix, b.Running.P50, b.Running.P99, b.Running.Max, b.Ready.P50, b.AllRunningSeconds, b.Footprint.CPUSeconds, b.Footprint.RSSMaxMiB,
		b.API[apiWrites], b.API[apiStatusPatches], b.API[apiEvents], b.API[apiTokens], b.API[apiReads], b.CRI)
	return b, nil
}

// breakdown splits each pod's startup with containerd's own timestamps:
// create returned -> sandbox created (scheduling, the agent's admission and
// queueing), sandbox created -> container created (RunPodSandbox, network,
// the agent's preparation), container created -> started (create + start in
// the runtime), started -> the API shows Running (status reporting).
func (h *harness) breakdown(ctx context.Context, ns string, tr *tracker, names []string) map[string]float64 {
	boxes, err := h.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil {
		return nil
	}
	boxOf := map[string]*runtimeapi.PodSandbox{}
	for _, b := range boxes {
		boxOf[b.Id] = b
	}
	cs, err := h.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil {
		return nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var bound, acked, sched, sandbox, create, report []float64
	// The runtime's busy span: the burst's first create call to the first
	// sandbox created, and the last container started to the last pod
	// Running in the API.
	var first, firstBox, lastStart, lastRunning time.Time
	for _, c := range cs {
		b := boxOf[c.PodSandboxId]
		if b == nil || !want[b.Metadata.Name] {
			continue
		}
		st, err := h.rt.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			continue
		}
		ps := tr.snapshot(b.Metadata.Name)
		boxAt := time.Unix(0, b.CreatedAt)
		cAt := time.Unix(0, c.CreatedAt)
		sAt := time.Unix(0, st.Status.StartedAt)
		if !ps.scheduled.IsZero() {
			bound = append(bound, ms(ps.scheduled.Sub(ps.created)))
		}
		if !ps.acked.IsZero() {
			acked = append(acked, ms(ps.acked.Sub(ps.created)))
		}
		if first.IsZero() || ps.created.Before(first) {
			first = ps.created
		}
		if firstBox.IsZero() || boxAt.Before(firstBox) {
			firstBox = boxAt
		}
		if sAt.After(lastStart) {
			lastStart = sAt
		}
		if ps.running.After(lastRunning) {
			lastRunning = ps.running
		}
		sched = append(sched, ms(boxAt.Sub(ps.created)))
		sandbox = append(sandbox, ms(cAt.Sub(boxAt)))
		create = append(create, ms(sAt.Sub(cAt)))
		report = append(report, ms(ps.running.Sub(sAt)))
	}
	med := func(x []float64) float64 { sort.Float64s(x); return stats(x).P50 }
	return map[string]float64{
		"create->bound-ms":                      med(bound),
		"create->first-status-ms":               med(acked),
		"create->sandbox-created-ms":            med(sched),
		"first-create->first-sandbox-ms":        ms(firstBox.Sub(first)),
		"last-started->last-running-ms":         ms(lastRunning.Sub(lastStart)),
		"sandbox-created->container-created-ms": med(sandbox),
		"container-created->started-ms":         med(create),
		"started->api-running-ms":               med(report),
	}
}

// restart kills a container's main process and measures until the API shows
// it running again with restartCount + 1.
func (h *harness) restart(ctx context.Context, ns string, tr *tracker, name string) (float64, error) {
	names := []string{name}
	if err := h.createAll(ctx, ns, tr, names, false, false); err != nil {
		return 0, err
	}
	if err := tr.waitAll(names, time.Minute, "Running", func(s *podState) bool { return !s.running.IsZero() }); err != nil {
		return 0, err
	}
	st := tr.snapshot(name)
	id := st.containerID[strings.Index(st.containerID, "://")+3:]
	resp, err := h.rt.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.Pid == 0 {
		return 0, fmt.Errorf("container %s: no pid in the verbose status (%v)", id, err)
	}
	tr.mu.Lock()
	tr.get(name).restartBase = st.restarts
	tr.get(name).restartedAt = time.Time{}
	tr.mu.Unlock()
	time.Sleep(time.Second)
	t0 := time.Now()
	if err := syscall.Kill(info.Pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	if err := tr.waitAll(names, time.Minute, "restarted", func(s *podState) bool { return !s.restartedAt.IsZero() }); err != nil {
		return 0, err
	}
	d := tr.snapshot(name).restartedAt.Sub(t0).Seconds()
	log.Printf("restart %s: %.3f s", name, d)
	return d, h.clearPods(ctx, ns, tr, names)
}

// deletion creates n pods whose process exits on SIGTERM, waits for them
// Running, deletes them at once with grace (nil: the default) and measures
// until all are gone from the API.
func (h *harness) deletion(ctx context.Context, ns string, tr *tracker, prefix string, n int, grace *int64) (Deletion, error) {
	names := podNames(prefix, n)
	if err := h.createAll(ctx, ns, tr, names, true, false); err != nil {
		return Deletion{}, err
	}
	if err := tr.waitAll(names, h.o.burstWait, "Running", func(s *podState) bool { return !s.running.IsZero() }); err != nil {
		return Deletion{}, err
	}
	time.Sleep(2 * time.Second)
	settle()
	t0 := time.Now()
	// The runtime side: until no sandbox of the namespace is ready any more
	// (the agent stopped every container and sandbox).
	// Each pod's own time runs until its sandbox is no longer ready.
	stopped := make(chan time.Time, 1)
	podStopped := map[string]time.Time{}
	go func() {
		deadline := t0.Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			ready, err := nodeagent.ReadySandboxPods(ctx, h.rt, ns)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			now := time.Now()
			for _, n := range names {
				if _, seen := podStopped[n]; !seen && !ready[n] {
					podStopped[n] = now
				}
			}
			if len(ready) == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopped <- time.Now()
	}()
	if err := h.deleteAll(ctx, ns, names, grace); err != nil {
		return Deletion{}, err
	}
	if err := tr.waitAll(names, 3*time.Minute, "deleted", func(s *podState) bool { return !s.deleted.IsZero() }); err != nil {
		return Deletion{}, err
	}
	var last time.Time
	for _, name := range names {
		if d := tr.snapshot(name).deleted; d.After(last) {
			last = d
		}
	}
	d := Deletion{GoneSeconds: last.Sub(t0).Seconds(), StoppedSeconds: (<-stopped).Sub(t0).Seconds()}
	var per []float64
	for _, n := range names {
		if at, ok := podStopped[n]; ok {
			per = append(per, ms(at.Sub(t0)))
		}
	}
	sort.Float64s(per)
	d.PodStopped = stats(per)
	log.Printf("deletion %s: all %d gone from the API in %.3f s, sandboxes stopped in %.3f s (per pod p50 %.0f ms)", prefix, n, d.GoneSeconds, d.StoppedSeconds, d.PodStopped.P50)
	return d, h.clearPods(ctx, ns, tr, names)
}

// profile fetches a CPU profile of the agent from its kubelet API with the
// API server's kubelet client certificate.
func (h *harness) profile(seconds int, path string) error {
	pki := h.env["CLUSTER_PKI"]
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-kubelet-client.crt"), filepath.Join(pki, "apiserver-kubelet-client.key"))
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: time.Duration(seconds+30) * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}},
	}}
	resp, err := c.Get(fmt.Sprintf("https://%s:10250/debug/pprof/profile?seconds=%d", h.env["NODE_IP"], seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s: %s", resp.Status, data)
	}
	return os.WriteFile(path, data, 0o644)
}

// session is one run of an agent on a fresh node, with a namespace and a
// watch on it and a sampler on the agent's process.
type session struct {
	name   string
	a      *nodeagent.Proc
	s      *sampler
	ns     string
	tr     *tracker
	cancel context.CancelFunc
}

// startSession cleans the node, drops the caches, starts the agent and
// waits for its node and a namespace to be ready.
func (h *harness) startSession(ctx context.Context, name, label string, r *AgentResult) (*session, error) {
	log.Printf("=== %s: %s", name, label)
	if err := h.cleanNode(ctx, ""); err != nil {
		return nil, err
	}
	dropCaches()
	a, err := h.startAgent(name)
	if err != nil {
		return nil, err
	}
	se := &session{name: name, a: a}
	t0 := time.Now()
	if err := h.waitNodeReady(ctx, a, 2*time.Minute); err != nil {
		return nil, h.failSession(se, err)
	}
	if r.NodeReadySeconds == 0 {
		r.NodeReadySeconds = time.Since(t0).Seconds()
	}
	log.Printf("node %s Ready after %.1f s", h.o.Node, time.Since(t0).Seconds())
	se.s = startSampler(a.Pid())
	nsObj, err := h.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: nsPrefix + name + "-"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, h.failSession(se, err)
	}
	se.ns = nsObj.Name
	for i := 0; ; i++ {
		if _, err := h.client.CoreV1().ServiceAccounts(se.ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if i > 300 {
			return nil, h.failSession(se, fmt.Errorf("no default service account in %s", se.ns))
		}
		time.Sleep(100 * time.Millisecond)
	}
	wctx, cancel := context.WithCancel(ctx)
	se.cancel = cancel
	if se.tr, err = h.watchNamespace(wctx, se.ns); err != nil {
		return nil, h.failSession(se, err)
	}
	time.Sleep(5 * time.Second)
	return se, nil
}

// endSession stops the agent and leaves the node clean.
func (h *harness) endSession(se *session) error {
	h.stopSession(se)
	if err := h.cleanNode(context.Background(), se.a.Dir); err != nil {
		return err
	}
	h.restoreHost()
	return nil
}

func (h *harness) stopSession(se *session) {
	if se.cancel != nil {
		se.cancel()
	}
	if se.s != nil {
		close(se.s.stop)
	}
	h.stopAgent(se.a)
}

// failSession ends a session that failed, pointing at the agent's log.
func (h *harness) failSession(se *session, err error) error {
	h.stopSession(se)
	_ = h.cleanNode(context.Background(), se.a.Dir)
	h.restoreHost()
	return fmt.Errorf("%w (agent log: %s)", err, filepath.Join(se.a.Dir, se.name+".log"))
}

// runAgents runs every scenario against every agent. The agents take turns:
// each repetition of the burst, restart and deletion scenarios runs each
// agent in -agents order, then the profile and each scale size, each turn a
// fresh start of the agent on a fresh node. Taking turns spreads what
// changes on the machine over a run (this VM's speed drifts: the same
// runtime-only burst took 6.2 s and 7.9 s half an hour apart) over both
// agents instead of giving one agent the first half of the run.
func (h *harness) runAgents(ctx context.Context, save func([]*AgentResult)) ([]*AgentResult, error) {
	o := h.o
	results := make([]*AgentResult, len(o.Agents))
	for i, name := range o.Agents {
		results[i] = &AgentResult{Agent: name}
		if name == "upstream" {
			results[i].Version = strings.TrimSpace(mustRun(h.upstreamBinary(), "--version"))
		} else {
			results[i].Version = "nodelet " + strings.TrimSpace(mustRun("git", "describe", "--always", "--dirty"))
		}
	}
	turn := func(label string, body func(se *session, r *AgentResult) error) error {
		for i, name := range o.Agents {
			se, err := h.startSession(ctx, name, label, results[i])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := body(se, results[i]); err != nil {
				return fmt.Errorf("%s: %w", name, h.failSession(se, err))
			}
			if err := h.endSession(se); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			save(results)
		}
		return nil
	}
	for rep := 0; rep < o.reps; rep++ {
		err := turn(fmt.Sprintf("repetition %d", rep+1), func(se *session, r *AgentResult) error {
			// (1)+(2): idle, burst, steady, then an empty node again.
			r.Idle = append(r.Idle, h.measureWindow(se.s, fmt.Sprintf("%s idle rep %d", se.name, rep+1)))
			b, err := h.burst(ctx, se.a, se.s, se.ns, se.tr, fmt.Sprintf("b%d", rep), o.burst, false)
			if err != nil {
				return err
			}
			b.Steady = h.measureWindow(se.s, fmt.Sprintf("%s steady with %d pods rep %d", se.name, o.burst, rep+1))
			r.Bursts = append(r.Bursts, b)
			if err := h.clearPods(ctx, se.ns, se.tr, podNames(fmt.Sprintf("b%d", rep), o.burst)); err != nil {
				return err
			}
			time.Sleep(5 * time.Second)
			// (2b) the same burst with spec.nodeName set: every pod reaches
			// the agent at once.
			if o.direct {
				b, err := h.burst(ctx, se.a, se.s, se.ns, se.tr, fmt.Sprintf("n%d", rep), o.burst, true)
				if err != nil {
					return err
				}
				r.DirectBursts = append(r.DirectBursts, b)
				if err := h.clearPods(ctx, se.ns, se.tr, podNames(fmt.Sprintf("n%d", rep), o.burst)); err != nil {
					return err
				}
				time.Sleep(5 * time.Second)
			}
			// (3) restart latency, a new pod each time (no back-off).
			d, err := h.restart(ctx, se.ns, se.tr, fmt.Sprintf("r%d", rep))
			if err != nil {
				return err
			}
			r.RestartSeconds = append(r.RestartSeconds, d)
			// (4) deletion with grace 0 and with the default grace.
			del, err := h.deletion(ctx, se.ns, se.tr, fmt.Sprintf("d0-%d", rep), o.delPods, new(int64))
			if err != nil {
				return err
			}
			r.DeleteGrace0 = append(r.DeleteGrace0, del)
			del, err = h.deletion(ctx, se.ns, se.tr, fmt.Sprintf("dg-%d", rep), o.delPods, nil)
			if err != nil {
				return err
			}
			r.DeleteDefaultGrace = append(r.DeleteDefaultGrace, del)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// The profile: an extra burst, not counted.
	if o.profile {
		err := turn("profile", func(se *session, r *AgentResult) error {
			if err := os.MkdirAll(filepath.Join(o.docsDir, "profiles"), 0o755); err != nil {
				return err
			}
			path := filepath.Join(o.docsDir, "profiles", se.name+"-burst.pprof")
			perr := make(chan error, 1)
			go func() { perr <- h.profile(20, path) }()
			time.Sleep(300 * time.Millisecond)
			if _, err := h.burst(ctx, se.a, se.s, se.ns, se.tr, "prof", o.burst, o.direct); err != nil {
				return err
			}
			if err := <-perr; err != nil {
				log.Printf("profile of %s: %v", se.name, err)
			} else {
				r.Profile = path
				top, err := run("go", "tool", "pprof", "-top", "-cum", "-nodecount=20", path)
				if err != nil {
					log.Printf("pprof: %v", err)
				} else if err := os.WriteFile(filepath.Join(o.docsDir, "profiles", se.name+"-burst-top.txt"), []byte(top), 0o644); err != nil {
					return err
				}
			}
			return h.clearPods(ctx, se.ns, se.tr, podNames("prof", o.burst))
		})
		if err != nil {
			return nil, err
		}
	}
	// (5) scale: one run per size.
	for _, n := range o.scale {
		err := turn(fmt.Sprintf("%d pods", n), func(se *session, r *AgentResult) error {
			b, err := h.burst(ctx, se.a, se.s, se.ns, se.tr, fmt.Sprintf("s%d", n), n, false)
			if err != nil {
				// A size the agent cannot reach in time is a result, not
				// the end of the run.
				log.Printf("scale %d: %v", n, err)
				r.ScaleErrors = append(r.ScaleErrors, fmt.Sprintf("%d pods: %v", n, err))
				return h.clearPods(ctx, se.ns, se.tr, podNames(fmt.Sprintf("s%d", n), n))
			}
			b.Steady = h.measureWindow(se.s, fmt.Sprintf("%s steady with %d pods", se.name, n))
			b.RSSCurve = nil
			r.Scale = append(r.Scale, b)
			return h.clearPods(ctx, se.ns, se.tr, podNames(fmt.Sprintf("s%d", n), n))
		})
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

func mustRun(name string, args ...string) string {
	out, err := run(name, args...)
	if err != nil {
		return "unknown"
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
