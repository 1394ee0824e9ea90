package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// figure is one row of the table: a value per agent (the median over the
// repetitions).
type figure struct {
	name string
	unit string
	get  func(*AgentResult) float64
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	var v []float64
	for _, x := range xs {
		v = append(v, f(x))
	}
	return median(v)
}

func burstFig(f func(*Burst) float64) func(*AgentResult) float64 {
	return func(a *AgentResult) float64 { return medianOf(a.Bursts, f) }
}

func directFig(f func(*Burst) float64) func(*AgentResult) float64 {
	return func(a *AgentResult) float64 { return medianOf(a.DirectBursts, f) }
}

// perPod is an API request class of a burst divided by its pods.
func perPod(class string) func(*Burst) float64 {
	return func(b *Burst) float64 {
		if b.API == nil || b.Pods == 0 {
			return math.NaN()
		}
		return b.API[class] / float64(b.Pods)
	}
}

func scaleFig(n int, f func(*Burst) float64) func(*AgentResult) float64 {
	return func(a *AgentResult) float64 {
		for _, b := range a.Scale {
			if b.Pods == n {
				return f(b)
			}
		}
		return math.NaN()
	}
}

func figures(r *Results) []figure {
	burst := 100
	if len(r.Agents) > 0 && len(r.Agents[0].Bursts) > 0 {
		burst = r.Agents[0].Bursts[0].Pods
	}
	del := fmt.Sprint(r.Config["deletePods"])
	figs := []figure{
		{fmt.Sprintf("startup burst (%d pods): create -> Running, p50", burst), "ms", burstFig(func(b *Burst) float64 { return b.Running.P50 })},
		{"same, p90", "ms", burstFig(func(b *Burst) float64 { return b.Running.P90 })},
		{"same, p99", "ms", burstFig(func(b *Burst) float64 { return b.Running.P99 })},
		{"same, max", "ms", burstFig(func(b *Burst) float64 { return b.Running.Max })},
		{"create -> Ready, p50", "ms", burstFig(func(b *Burst) float64 { return b.Ready.P50 })},
		{"create -> Ready, p99", "ms", burstFig(func(b *Burst) float64 { return b.Ready.P99 })},
		{fmt.Sprintf("burst start -> all %d Running", burst), "s", burstFig(func(b *Burst) float64 { return b.AllRunningSeconds })},
		{fmt.Sprintf("direct burst (%d pods, spec.nodeName set, no scheduler): create -> Running, p50", burst), "ms", directFig(func(b *Burst) float64 { return b.Running.P50 })},
		{"same, p99", "ms", directFig(func(b *Burst) float64 { return b.Running.P99 })},
		{fmt.Sprintf("same, burst start -> all %d Running", burst), "s", directFig(func(b *Burst) float64 { return b.AllRunningSeconds })},
		{"same, agent CPU (start -> all Ready)", "CPU-s", directFig(func(b *Burst) float64 { return b.Footprint.CPUSeconds })},
		{"same, whole machine busy (start -> 5 s after all Ready)", "CPU-s", directFig(func(b *Burst) float64 { return valOr(b.OtherCPUSeconds, "machine") })},
		{"agent RSS idle, 0 pods (mean over the window)", "MiB", func(a *AgentResult) float64 {
			return medianOf(a.Idle, func(f Footprint) float64 { return f.RSSMeanMiB })
		}},
		{"agent CPU idle, 0 pods, per 60 s", "CPU-s", func(a *AgentResult) float64 {
			return medianOf(a.Idle, func(f Footprint) float64 { return per60(f) })
		}},
		{"agent RSS during the burst (max)", "MiB", burstFig(func(b *Burst) float64 { return b.Footprint.RSSMaxMiB })},
		{"agent CPU during the burst (start -> all Ready)", "CPU-s", burstFig(func(b *Burst) float64 { return b.Footprint.CPUSeconds })},
		{fmt.Sprintf("agent RSS steady, %d pods (mean)", burst), "MiB", burstFig(func(b *Burst) float64 { return b.Steady.RSSMeanMiB })},
		{"same, of it anonymous (heap, stacks)", "MiB", burstFig(func(b *Burst) float64 { return nanIfZero(b.Steady.AnonMeanMiB) })},
		{"same, of it mapped file pages (the binary)", "MiB", burstFig(func(b *Burst) float64 { return nanIfZero(b.Steady.FileMeanMiB) })},
		{fmt.Sprintf("agent CPU steady, %d pods, per 60 s", burst), "CPU-s", burstFig(func(b *Burst) float64 { return per60(b.Steady) })},
		{"restart: main process killed -> API shows it running, restartCount+1", "s", func(a *AgentResult) float64 { return median(a.RestartSeconds) }},
		{fmt.Sprintf("deletion of %s pods, grace 0 -> all gone from the API", del), "s", func(a *AgentResult) float64 {
			return medianOf(a.DeleteGrace0, func(d Deletion) float64 { return d.GoneSeconds })
		}},
		{"same, -> every sandbox stopped in containerd", "s", func(a *AgentResult) float64 {
			return medianOf(a.DeleteGrace0, func(d Deletion) float64 { return d.StoppedSeconds })
		}},
		{"same, per pod: delete call -> its sandbox stopped, p50", "ms", func(a *AgentResult) float64 {
			return medianOf(a.DeleteGrace0, func(d Deletion) float64 { return nanIfZero(d.PodStopped.P50) })
		}},
		{fmt.Sprintf("deletion of %s pods, default grace (exit on SIGTERM) -> all gone from the API", del), "s", func(a *AgentResult) float64 {
			return medianOf(a.DeleteDefaultGrace, func(d Deletion) float64 { return d.GoneSeconds })
		}},
		{"same, -> every sandbox stopped in containerd", "s", func(a *AgentResult) float64 {
			return medianOf(a.DeleteDefaultGrace, func(d Deletion) float64 { return d.StoppedSeconds })
		}},
	}
	var sizes []int
	for _, a := range r.Agents {
		for _, b := range a.Scale {
			if !containsInt(sizes, b.Pods) {
				sizes = append(sizes, b.Pods)
			}
		}
	}
	sort.Ints(sizes)
	for _, n := range sizes {
		figs = append(figs,
			figure{fmt.Sprintf("scale %d pods: create -> Running, p50", n), "ms", scaleFig(n, func(b *Burst) float64 { return b.Running.P50 })},
			figure{fmt.Sprintf("scale %d pods: create -> Running, p99", n), "ms", scaleFig(n, func(b *Burst) float64 { return b.Running.P99 })},
			figure{fmt.Sprintf("scale %d pods: all Running", n), "s", scaleFig(n, func(b *Burst) float64 { return b.AllRunningSeconds })},
			figure{fmt.Sprintf("scale %d pods: agent RSS steady (mean)", n), "MiB", scaleFig(n, func(b *Burst) float64 { return b.Steady.RSSMeanMiB })},
			figure{fmt.Sprintf("scale %d pods: agent CPU steady, per 60 s", n), "CPU-s", scaleFig(n, func(b *Burst) float64 { return per60(b.Steady) })},
		)
	}
	return figs
}

func nanIfZero(v float64) float64 {
	if v == 0 {
		return math.NaN()
	}
	return v
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// per60 is the CPU seconds of a window scaled to 60 s.
func per60(f Footprint) float64 {
	if f.Seconds == 0 {
		return math.NaN()
	}
	return f.CPUSeconds * 60 / f.Seconds
}

func agent(r *Results, name string) *AgentResult {
	for _, a := range r.Agents {
		if a.Agent == name {
			return a
		}
	}
	return nil
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// writeReport writes the Markdown section and the charts, and puts the
// section into -doc when asked.
func writeReport(o *options, r *Results) error {
	up, nl := agent(r, "upstream"), agent(r, "nodelet")
	if up == nil || nl == nil {
		return fmt.Errorf("results lack an agent (have %d)", len(r.Agents))
	}
	cdf := filepath.Join(o.docsDir, "compare-startup-cdf.png")
	rss := filepath.Join(o.docsDir, "compare-burst-rss.png")
	if err := os.MkdirAll(o.docsDir, 0o755); err != nil {
		return err
	}
	if err := drawCDF(cdf, up, nl); err != nil {
		return err
	}
	if err := drawRSS(rss, up, nl); err != nil {
		return err
	}
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	reps := fmt.Sprint(r.Config["reps"])
	p("## nodelet vs upstream kubelet v1.37.2")
	p("")
	p("Written by `go run ./bench/compare` (a step of `make bench`) on %s. Machine: %s cores (%s), %s, %s, kernel %s, cgroup %s;",
		r.Date[:10], r.Machine["cpus"], r.Machine["cpu"], r.Machine["memory"], r.Machine["os"], r.Machine["kernel"], r.Machine["cgroup"])
	p("%s, %s, %s; control plane %s. Agents: `%s` and `%s`.",
		r.Machine["containerd"], r.Machine["runc"], r.Machine["go"], r.Machine["control"], up.Version, nl.Version)
	p("")
	p("Both agents run as node `bench-node` of the same control plane, on the same containerd, with the")
	p("same KubeletConfiguration (in `bench/results/compare.json`), taking turns: each repetition runs")
	p("upstream then nodelet, then the profile burst and each scale size the same way, every turn a")
	p("fresh start of the agent on a fresh node (Node, pods, sandboxes and kubepods cgroups removed")
	p("between turns, caches dropped), busybox pre-pulled. This VM's speed drifts over a run (the same")
	p("runtime-only burst took 6.2 s and 7.9 s half an hour apart); taking turns spreads the drift over")
	p("both agents. Every burst, deletion and floor burst starts after dropping the caches and waiting")
	p("for the machine to be quiet.")
	p("Figures are medians of %s repetitions (scale: one run per size). Ratio = nodelet / upstream", reps)
	p("(below 1: nodelet is faster or smaller).")
	p("")
	p("| figure | upstream kubelet | nodelet | ratio |")
	p("|---|---|---|---|")
	for _, f := range figures(r) {
		u, n := f.get(up), f.get(nl)
		ratio := "-"
		if u > 0 && !math.IsNaN(n) {
			ratio = fmt.Sprintf("%.2f", n/u)
		}
		p("| %s (%s) | %s | %s | %s |", f.name, f.unit, num(u), num(n), ratio)
	}
	p("")
	p("Startup latencies run from the return of each pod's create call (creationTimestamp only has")
	p("second granularity) to the first watch event showing the pod Running with every container")
	p("started, or Ready; \"all Running\" runs from just before the first create call. All pods are")
	p("created at once (one goroutine each) and bound by kube-scheduler; the \"direct\" burst creates")
	p("the same pods with spec.nodeName already set, so all of them reach the agent at once (the")
	p("profile burst is one of these). RSS and CPU are the agent's")
	p("process alone (`/proc/PID/status` VmRSS, `/proc/PID/stat` utime+stime, sampled every 250 ms);")
	p("idle and steady windows last %v s. Restart: SIGKILL to the container's main process from the", r.Config["windowSeconds"])
	p("host; a new pod each time, so no back-off. Deletion: pods whose shell exits on SIGTERM, all")
	p("deleted at once; the time runs until the last Deleted watch event.")
	p("")
	p("Where the time goes in the burst (medians over the pods of each burst, then over the")
	p("repetitions; from containerd's own timestamps, and the CPU the other processes used during it):")
	p("")
	p("| step | upstream kubelet | nodelet |")
	p("|---|---|---|")
	for _, k := range []string{"create->bound-ms", "first-create->first-sandbox-ms", "create->first-status-ms", "create->sandbox-created-ms", "sandbox-created->container-created-ms", "container-created->started-ms", "started->api-running-ms", "last-started->last-running-ms"} {
		g := func(a *AgentResult) float64 {
			return medianOf(a.Bursts, func(b *Burst) float64 { return valOr(b.Breakdown, k) })
		}
		p("| %s | %s | %s |", strings.TrimSuffix(k, "-ms")+" (ms)", num(g(up)), num(g(nl)))
	}
	p("")
	p("The machine's CPU by process, from the burst's first create to 5 s after its last pod was Ready")
	p("(CPU-s; medians over the repetitions), for the scheduled burst and the one with spec.nodeName set:")
	p("")
	floor := bestFloor(r, burstPods(r))
	p("| process | scheduled: upstream | scheduled: nodelet | spec.nodeName: upstream | spec.nodeName: nodelet | the runtime alone (floor) |")
	p("|---|---|---|---|---|---|")
	keys := []string{"containerd", "containerd-children", "containerd-shims", "containers", "kernel-threads", "irq", "kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager", "benchmark", "steal"}
	what := map[string]string{
		"agent":                   "the agent",
		"containerd":              "containerd",
		"containerd-shims":        "containerd shims (with the runc processes they reaped)",
		"containerd-children":     "CNI plugins (containerd's reaped children)",
		"containers":              "the containers' processes (runc init's setup before exec included)",
		"kernel-threads":          "kernel threads",
		"irq":                     "interrupts (irq + softirq)",
		"benchmark":               "this benchmark (its creates and watch)",
		"kube-apiserver":          "kube-apiserver",
		"etcd":                    "etcd",
		"kube-scheduler":          "kube-scheduler",
		"kube-controller-manager": "kube-controller-manager",
		"steal":                   "stolen by the hypervisor (counted as busy, used by no process here)",
		"rest":                    "the rest (other processes, short-lived ones nobody here reaped)",
		"machine":                 "whole machine busy (2 cores)",
		"window":                  "that window's length (s)",
	}
	// The agent's CPU over the same window is not sampled separately; its
	// burst footprint (start -> all Ready) stands in for it.
	val := func(b *Burst, k string) float64 {
		switch k {
		case "agent":
			return b.Footprint.CPUSeconds
		case "rest":
			rest := valOr(b.OtherCPUSeconds, "machine") - b.Footprint.CPUSeconds
			for _, k := range keys {
				if v, ok := b.OtherCPUSeconds[k]; ok {
					rest -= v
				}
			}
			return rest
		}
		return valOr(b.OtherCPUSeconds, k)
	}
	// The floor's window runs from its first call to its last start (no
	// 5 s after), with no agent and an idle control plane.
	floorVal := func(k string) float64 {
		if floor == nil || floor.CPUSeconds == nil {
			return math.NaN()
		}
		switch k {
		case "agent":
			return 0
		case "window":
			return floor.AllSeconds + 5
		case "rest":
			rest := valOr(floor.CPUSeconds, "machine")
			for _, k := range keys {
				rest -= floor.CPUSeconds[k]
			}
			return rest
		}
		return valOr(floor.CPUSeconds, k)
	}
	for _, k := range append(append([]string{"agent"}, keys...), "rest", "machine", "window") {
		sched := func(a *AgentResult) float64 { return medianOf(a.Bursts, func(b *Burst) float64 { return val(b, k) }) }
		direct := func(a *AgentResult) float64 {
			return medianOf(a.DirectBursts, func(b *Burst) float64 { return val(b, k) })
		}
		p("| %s | %s | %s | %s | %s | %s |", what[k], num(sched(up)), num(sched(nl)), num(direct(up)), num(direct(nl)), num(floorVal(k)))
	}
	if floor != nil {
		p("")
		p("The floor's column is its fastest burst of the same pods (below), from its first call to 5 s after")
		p("its last start, with no agent and the control plane idle.")
	}
	writeAPI(p, up, nl)
	writeCRI(p, up, nl, floor)
	p("")
	p("![startup latency CDF](%s)", filepath.Base(cdf))
	p("")
	p("Startup latency distribution (create -> Running), every pod of every burst repetition:")
	p("x in seconds, y the fraction of pods Running; blue upstream kubelet, orange nodelet.")
	p("")
	p("![agent RSS during the burst](%s)", filepath.Base(rss))
	p("")
	p("Agent RSS (MiB) over time (s) from the first burst's first create call to 5 s after its last")
	p("pod was Ready; blue upstream kubelet, orange nodelet.")
	p("")
	writeFloor(p, r, nl)
	writeDeletionFloor(p, r, up, nl)
	writeTargets(p, r, up, nl)
	p("")
	p("CPU profiles of both agents during an extra (unmeasured) burst:")
	p("[profiles/nodelet-burst-top.txt](profiles/nodelet-burst-top.txt),")
	p("[profiles/upstream-burst-top.txt](profiles/upstream-burst-top.txt) (the `.pprof` files beside them).")
	return o.WriteSection(b.String())
}

func valOr(m map[string]float64, k string) float64 {
	if v, ok := m[k]; ok {
		return v
	}
	return math.NaN()
}

// bestFloor is the fastest floor burst of n pods (by time to all started).
func bestFloor(r *Results, n int) *Floor {
	var best *Floor
	for _, f := range r.Floor {
		if f.Pods == n && (best == nil || f.AllSeconds < best.AllSeconds) {
			best = f
		}
	}
	return best
}

// writeFloor reports the runtime alone: the same pods created straight
// through the CRI, as fast as containerd can.
func writeFloor(p func(string, ...any), r *Results, nl *AgentResult) {
	if len(r.Floor) == 0 {
		return
	}
	p("")
	p("### The runtime alone (the floor)")
	p("")
	p("The same pods (a sandbox on the same CNI network with the agents' DNS settings, one busybox")
	p("container with the /etc/hosts, termination-log and service account token mounts every kubelet")
	p("gives it, a BestEffort pod cgroup) created by `bench/compare` straight through the CRI, with no")
	p("agent, API server or scheduler: RunPodSandbox, CreateContainer, StartContainer, at most N pods")
	p("at a time. Each pod's")
	p("time runs from the start of the burst to its StartContainer's return. No agent can start these")
	p("pods faster on this machine. Each burst runs before the agents and again after them; the")
	p("figures below the table use the faster of the two.")
	p("")
	p("| pods | at a time | measured | started p50 (ms) | p99 (ms) | all started (s) | machine busy (CPU-s) | failed in the runtime |")
	p("|---|---|---|---|---|---|---|---|")
	for _, f := range r.Floor {
		at := fmt.Sprint(f.Concurrency)
		if f.Concurrency == f.Pods {
			at = "all"
		}
		when := f.When
		if when == "" {
			when = "after the agents"
		}
		p("| %d | %s | %s | %s | %s | %s | %s | %d |", f.Pods, at, when, num(f.Started.P50), num(f.Started.P99), num(f.AllSeconds), num(f.CPUSeconds["machine"]), f.Failed)
	}
	if best := bestFloor(r, burstPods(r)); best != nil {
		nlAll := burstFig(func(b *Burst) float64 { return b.AllRunningSeconds })(nl)
		p("")
		p("nodelet's all-%d-Running time is %.2f x the runtime's best (%s s against %s s); the rest is the", best.Pods, nlAll/best.AllSeconds, num(nlAll), num(best.AllSeconds))
		p("API path (scheduling, watch, token, status write) and the agent's own work. Giving containerd")
		p("every pod at once (\"at a time\" = all) is slower for the median pod than a few at a time:")
		p("nodelet creates at most max(8, 2 x CPUs) sandboxes and containers at once, containers of")
		p("pods already started first, sandboxes in all slots but one.")
		writeBudget(p, r, best)
	}
}

// bestAPIFloor is the API floor run, with or without a kubelet's
// requests, whose control plane used the least CPU.
func bestAPIFloor(r *Results, requests bool) *APIFloor {
	var best *APIFloor
	for _, f := range r.APIFloor {
		if f.Requests == requests && (best == nil || controlPlaneSum(f.CPUSeconds) < controlPlaneSum(best.CPUSeconds)) {
			best = f
		}
	}
	return best
}

// runtimeKeys are the CPU groups that are the runtime's work.
var runtimeKeys = []string{"containerd", "containerd-children", "containerd-shims", "containers", "kernel-threads", "irq"}

// writeBudget splits the machine's CPU in each agent's direct burst into
// what the runtime floor and the API floor need anyway and what the agent
// adds (its own CPU, the control plane's work for its requests, the
// runtime's work beyond the floor's), and derives two bounds: the runtime
// floor plus the control plane's work for the creates (no agent can beat
// it here), and plus the work for a kubelet's minimal requests as well (no
// kubelet can), both on the same cores.
func writeBudget(p func(string, ...any), r *Results, floor *Floor) {
	api := bestAPIFloor(r, false)
	if api == nil || floor.CPUSeconds == nil {
		return
	}
	cores := float64(cpus(r))
	sum := func(m map[string]float64, keys []string) float64 {
		var s float64
		for _, k := range keys {
			s += m[k]
		}
		return s
	}
	rtFloor := sum(floor.CPUSeconds, runtimeKeys)
	cpFloor := controlPlaneSum(api.CPUSeconds) + api.CPUSeconds["benchmark"]
	bound := floor.AllSeconds + cpFloor/cores
	p("")
	p("What the agents add to the floors. The runtime's work (containerd, CNI plugins, shims and runc,")
	p("the containers' setup, kernel threads, interrupts) in the floor burst above: %s CPU-s. The control", num(rtFloor))
	p("plane's own work for the same %d creates with spec.nodeName set, to a node no agent serves, and", api.Pods)
	p("this program's watch of them (the API floor, over the same window as a burst: from the first create")
	p("to 5 s after the last): kube-apiserver %s, etcd %s, kube-controller-manager %s, kube-scheduler %s,", num(api.CPUSeconds["kube-apiserver"]),
		num(api.CPUSeconds["etcd"]), num(api.CPUSeconds["kube-controller-manager"]), num(api.CPUSeconds["kube-scheduler"]))
	p("this program %s: %s CPU-s. Both run on the same %d cores, which the runtime alone already keeps", num(api.CPUSeconds["benchmark"]), num(cpFloor), int(cores))
	p("busy, so **no agent can have the %d pods Running here in less than about %s s** (the floor's", floor.Pods, num(bound))
	p("%s s + %s CPU-s / %d cores), %.2f x the floor.", num(floor.AllSeconds), num(cpFloor), int(cores), bound/floor.AllSeconds)
	cpKubelet := math.NaN()
	if req := bestAPIFloor(r, true); req != nil {
		// The node identity's own client stands in for an agent: its CPU
		// is the agent's, not the control plane's.
		cpKubelet = controlPlaneSum(req.CPUSeconds) + api.CPUSeconds["benchmark"]
		kb := floor.AllSeconds + cpKubelet/cores
		p("")
		p("A kubelet cannot start a pod without some API requests of its own: a watch of its pods, the")
		p("pod's service account token (its projected volume), one status write to Running, and the")
		p("Pulled, Created and Started events `kubectl describe` shows (nodelet makes exactly these; the")
		p("upstream kubelet makes more, see the API table). Made by this program as the node's identity,")
		p("8 pods at a time, right after the same creates and with no agent (the API floor with a kubelet's")
		p("requests, done %s s after the first create), the control plane used %s CPU-s (kube-apiserver %s,", num(req.RequestSeconds),
			num(controlPlaneSum(req.CPUSeconds)), num(req.CPUSeconds["kube-apiserver"]))
		p("etcd %s), so **no kubelet can have them all Running here in less than about %s s** (the floor's", num(req.CPUSeconds["etcd"]), num(kb))
		p("%s s + %s CPU-s with the creates' client / %d cores), %.2f x the runtime floor, before any work", num(floor.AllSeconds), num(cpKubelet), int(cores), kb/floor.AllSeconds)
		p("of its own.")
	}
	type row struct {
		what string
		get  func(b *Burst) float64
	}
	rows := []row{
		{"the agent's own CPU", func(b *Burst) float64 { return b.Footprint.CPUSeconds }},
		{"the runtime beyond the floor's", func(b *Burst) float64 { return sum(b.OtherCPUSeconds, runtimeKeys) - rtFloor }},
		{"the control plane and this program beyond the API floor's", func(b *Burst) float64 {
			return controlPlaneSum(b.OtherCPUSeconds) + b.OtherCPUSeconds["benchmark"] - cpFloor
		}},
	}
	hasMin := !math.IsNaN(cpKubelet)
	// col is the last column: the minimal requests' figure, or nothing
	// without that API floor.
	col := func(v float64) string {
		if !hasMin {
			return ""
		}
		return " " + num(v) + " |"
	}
	p("")
	p("Beyond the floors, in the direct bursts (CPU-s, medians; \"the agent's share\" is their sum over")
	p("the cores, the wall time it costs when both cores are busy):")
	p("")
	if hasMin {
		p("| CPU-s beyond the floors | upstream kubelet | nodelet | a kubelet's minimal requests alone (API floor with them) |")
		p("|---|---|---|---|")
	} else {
		p("| CPU-s beyond the floors | upstream kubelet | nodelet |")
		p("|---|---|---|")
	}
	up, nl := agent(r, "upstream"), agent(r, "nodelet")
	total := func(a *AgentResult) float64 {
		var t float64
		for _, rw := range rows {
			t += directFig(rw.get)(a)
		}
		return t
	}
	minimal := []float64{math.NaN(), 0, cpKubelet - cpFloor}
	for i, rw := range rows {
		p("| %s | %s | %s |%s", rw.what, num(directFig(rw.get)(up)), num(directFig(rw.get)(nl)), col(minimal[i]))
	}
	p("| all of it | %s | %s |%s", num(total(up)), num(total(nl)), col(cpKubelet-cpFloor))
	p("| the agent's share: all of it / %d cores (s) | %s | %s |%s", int(cores), num(total(up)/cores), num(total(nl)/cores), col((cpKubelet-cpFloor)/cores))
	all := directFig(func(b *Burst) float64 { return b.AllRunningSeconds })
	p("| the first bound + the agent's share (s) | %s | %s |%s", num(bound+total(up)/cores), num(bound+total(nl)/cores), col(bound+(cpKubelet-cpFloor)/cores))
	p("| measured: first create -> all Running (s) | %s | %s |%s", num(all(up)), num(all(nl)), col(math.NaN()))
}

// bestDeletionFloor is the deletion floor run with every pod stopped at
// once (as the agents stop them) with the lowest median.
func bestDeletionFloor(r *Results) *DeletionFloor {
	var best *DeletionFloor
	for _, f := range r.DeletionFloor {
		if f.Concurrency == f.Pods && (best == nil || f.PodStopped.P50 < best.PodStopped.P50) {
			best = f
		}
	}
	return best
}

// writeDeletionFloor reports the deletion scenario's pods stopped by the
// runtime alone.
func writeDeletionFloor(p func(string, ...any), r *Results, up, nl *AgentResult) {
	if len(r.DeletionFloor) == 0 {
		return
	}
	p("")
	p("### Deletion: the runtime alone")
	p("")
	p("The deletion scenario's pods (a shell that exits on SIGTERM) created by `bench/compare` straight")
	p("through the CRI, then stopped as a kubelet stops a pod: StopContainer with the 2 s minimum grace")
	p("period, then StopPodSandbox, with no agent or API server. Each pod's time runs from the first")
	p("stop call to its sandbox no longer listed ready (polled every 50 ms, as in the agents'")
	p("scenario). \"All\" stops every pod at once, as an agent does when they are deleted together; 4 and")
	p("1 at a time delay the later pods' SIGTERM (no agent should), and show whether another order")
	p("would give the median pod a shorter wait.")
	p("")
	p("| pods | at a time | measured | stopped p50 (ms) | p99 (ms) | all stopped (s) | failed |")
	p("|---|---|---|---|---|---|---|")
	for _, f := range r.DeletionFloor {
		at := fmt.Sprint(f.Concurrency)
		if f.Concurrency == f.Pods {
			at = "all"
		}
		p("| %d | %s | %s | %s | %s | %s | %d |", f.Pods, at, f.When, num(f.PodStopped.P50), num(f.PodStopped.P99), num(f.AllSeconds), f.Failed)
	}
	best := bestDeletionFloor(r)
	if best == nil {
		return
	}
	del := func(a *AgentResult) float64 {
		return medianOf(a.DeleteGrace0, func(d Deletion) float64 { return nanIfZero(d.PodStopped.P50) })
	}
	p("")
	p("Per pod p50 with grace 0: upstream %s ms, nodelet %s ms, the runtime alone at best %s ms", num(del(up)), num(del(nl)), num(best.PodStopped.P50))
	p("(%.2f x upstream's: no agent stopping these pods at once can get below that ratio in this run).", best.PodStopped.P50/del(up))
}

// writeAPI reports the API requests each agent made per pod started, from
// the API server's audit log (every request of the system:nodes group).
func writeAPI(p func(string, ...any), up, nl *AgentResult) {
	if len(nl.DirectBursts) == 0 && (len(nl.Bursts) == 0 || nl.Bursts[0].API == nil) {
		return
	}
	p("")
	p("API requests per pod started (the agent's node identity in the API server's audit log, from the")
	p("first create to 5 s after the last pod was Ready, divided by the pods; the node's own lease and")
	p("status writes of that window included; medians over the repetitions):")
	p("")
	p("| requests per pod | scheduled: upstream | scheduled: nodelet | spec.nodeName: upstream | spec.nodeName: nodelet |")
	p("|---|---|---|---|---|")
	for _, c := range []struct{ k, what string }{
		{apiStatusPatches, "pod status writes (pods/status)"},
		{apiEvents, "event writes"},
		{apiTokens, "service account token requests"},
		{apiOtherWrites, "other writes (lease, node status, ...)"},
		{apiWrites, "all writes"},
		{apiReads, "reads (get, list, watch)"},
	} {
		p("| %s | %s | %s | %s | %s |", c.what, num(burstFig(perPod(c.k))(up)), num(burstFig(perPod(c.k))(nl)),
			num(directFig(perPod(c.k))(up)), num(directFig(perPod(c.k))(nl)))
	}
}

// writeCRI reports the CRI calls containerd answered per pod started, by
// method, for each agent's bursts and for the runtime floor.
func writeCRI(p func(string, ...any), up, nl *AgentResult, floor *Floor) {
	var all []map[string]float64
	for _, a := range []*AgentResult{up, nl} {
		for _, b := range append(append([]*Burst(nil), a.Bursts...), a.DirectBursts...) {
			all = append(all, b.CRI)
		}
	}
	if floor != nil {
		all = append(all, floor.CRI)
	}
	methods := criMethods(all...)
	if len(methods) == 1 {
		return
	}
	perPodCRI := func(m string) func(*Burst) float64 {
		return func(b *Burst) float64 {
			if b.CRI == nil || b.Pods == 0 {
				return math.NaN()
			}
			return b.CRI[m] / float64(b.Pods)
		}
	}
	p("")
	p("CRI calls per pod started (containerd's own count of the calls it answered, by method, over the")
	p("same window as the API requests, divided by the pods; the agents' periodic relists of that window")
	p("included; medians over the repetitions), and the floor's (the runtime alone, the same pods):")
	p("")
	p("| CRI calls per pod | scheduled: upstream | scheduled: nodelet | spec.nodeName: upstream | spec.nodeName: nodelet | the runtime alone (floor) |")
	p("|---|---|---|---|---|---|")
	for _, m := range methods {
		fl := math.NaN()
		if floor != nil && floor.CRI != nil && floor.Pods > 0 {
			fl = floor.CRI[m] / float64(floor.Pods)
		}
		name := m
		if m == criAll {
			name = "all"
		}
		p("| %s | %s | %s | %s | %s | %s |", name, num(burstFig(perPodCRI(m))(up)), num(burstFig(perPodCRI(m))(nl)),
			num(directFig(perPodCRI(m))(up)), num(directFig(perPodCRI(m))(nl)), num(fl))
	}
}

// cpus is the machine's CPU count from the results (2 if unknown).
func cpus(r *Results) int {
	n, err := strconv.Atoi(r.Machine["cpus"])
	if err != nil || n < 1 {
		return 2
	}
	return n
}

func burstPods(r *Results) int {
	if len(r.Agents) > 0 && len(r.Agents[0].Bursts) > 0 {
		return r.Agents[0].Bursts[0].Pods
	}
	return 100
}

// writeTargets checks the targets of the startup issue against this run,
// on the burst with spec.nodeName set (all pods reach the agent at once).
func writeTargets(p func(string, ...any), r *Results, up, nl *AgentResult) {
	if len(nl.DirectBursts) == 0 || len(up.DirectBursts) == 0 {
		return
	}
	ratio := func(f func(*AgentResult) float64) float64 { return f(nl) / f(up) }
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	n := burstPods(r)
	p50 := directFig(func(b *Burst) float64 { return b.Running.P50 })
	p99 := directFig(func(b *Burst) float64 { return b.Running.P99 })
	all := directFig(func(b *Burst) float64 { return b.AllRunningSeconds })
	writes := directFig(perPod(apiWrites))
	status := directFig(perPod(apiStatusPatches))
	rss := burstFig(func(b *Burst) float64 { return b.Steady.RSSMeanMiB })
	del := func(a *AgentResult) float64 {
		return medianOf(a.DeleteGrace0, func(d Deletion) float64 { return nanIfZero(d.PodStopped.P50) })
	}
	p("")
	p("### Targets")
	p("")
	p("On the burst with spec.nodeName set; nodelet / upstream in this run unless absolute.")
	p("")
	p("| target | this run | verdict |")
	p("|---|---|---|")
	// What no kubelet can beat here (writeBudget): the runtime floor plus
	// the control plane's work for the creates and a kubelet's minimal
	// requests, on the same cores.
	allNote, p99Note := "", ""
	floor := bestFloor(r, n)
	if api, req := bestAPIFloor(r, false), bestAPIFloor(r, true); floor != nil && api != nil && req != nil {
		cp := (controlPlaneSum(req.CPUSeconds) + api.CPUSeconds["benchmark"]) / float64(cpus(r))
		allNote = fmt.Sprintf(" (any kubelet: at least %.2f x)", (floor.AllSeconds+cp)/floor.AllSeconds)
		p99Note = fmt.Sprintf(" (any kubelet: at least %.2f)", (floor.Started.P99/1000+cp)/(p99(up)/1000))
	}
	if floor != nil {
		x := all(nl) / floor.AllSeconds
		p("| first create -> all %d Running <= 1.1 x the runtime floor (%s s) | %.2f x (%s s)%s | %s |", n, num(floor.AllSeconds), x, num(all(nl)), allNote, verdict(x <= 1.1))
	}
	p("| create -> Running p99 <= 0.5 x | %.2f%s | %s |", ratio(p99), p99Note, verdict(ratio(p99) <= 0.5))
	p("| create -> Running p50 <= 0.35 x | %.2f | %s |", ratio(p50), verdict(ratio(p50) <= 0.35))
	p("| API writes per pod start <= upstream's | %s vs %s | %s |", num(writes(nl)), num(writes(up)), verdict(writes(nl) <= writes(up)))
	p("| pod status writes per uneventful pod start <= 1 | %s | %s |", num(status(nl)), verdict(status(nl) <= 1))
	rs := median(nl.RestartSeconds)
	p("| kill -9 -> restarted in the API, p50 <= 0.25 s | %s s | %s |", num(rs), verdict(rs <= 0.25))
	floorNote := ""
	if df := bestDeletionFloor(r); df != nil {
		floorNote = fmt.Sprintf(" (the runtime alone: %.2f)", df.PodStopped.P50/del(up))
	}
	p("| %s pods deleted with grace 0, per pod p50 <= 0.5 x | %.2f%s | %s |", fmt.Sprint(r.Config["deletePods"]), ratio(del), floorNote, verdict(ratio(del) <= 0.5))
	p("| agent RSS steady with %d pods <= 0.4 x | %.2f | %s |", n, ratio(rss), verdict(ratio(rss) <= 0.4))
}
