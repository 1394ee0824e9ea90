// Command ecosystem runs what the tools around a kubelet read, side by side:
// nodelet and the upstream kubelet, in turn, join the control plane as node
// bench-ecosystem and run the same three pods (a CPU burner limited to
// 200m, a pod holding 64 MiB of tmpfs under a 128 MiB limit, a pod with a
// sidecar). Then, for each agent:
//
//   - /metrics/cadvisor through the API server's node proxy (as
//     Prometheus' kubernetes_sd cadvisor job scrapes it): which of the
//     families dashboards read are served, how many families and series,
//     the scrape's latency, the agent's CPU per scrape, and the burner's
//     and the hog's figures against their cgroups;
//
//   - the pod-resources API on <root-dir>/pod-resources/kubelet.sock: what
//     List reports for the pods, and its latency;
//
//   - metrics-server (kubectl top) started for the agent: how long until
//     `kubectl top pod` lists the pods, and its figures for the burner and
//     the hog against their cgroups.
//
//     go run ./bench/ecosystem -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control
// plane up (hack/bench.sh does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
)

const nsPrefix = "bench-eco-"

// Result is one agent's figures.
type Result struct {
	Agent string `json:"agent"`
	// Families served of nodeagent.CadvisorFamilies, and those missing.
	FamiliesListed int      `json:"familiesListed"`
	Missing        []string `json:"missing"`
	// Families and Series: everything /metrics/cadvisor served.
	Families int      `json:"families"`
	Names    []string `json:"names"`
	Series   int      `json:"series"`
	// ScrapeMs: the scrapes' latencies through the API server.
	ScrapeMs []float64 `json:"scrapeMs"`
	// AgentCPUPerScrapeMs: the agent's CPU time per scrape.
	AgentCPUPerScrapeMs float64 `json:"agentCpuPerScrapeMs"`
	// BurnerCPUError, HogWorkingSetError: relative difference to the cgroup.
	BurnerCPUError     float64 `json:"burnerCpuError"`
	HogWorkingSetError float64 `json:"hogWorkingSetError"`
	HogLimitBytes      float64 `json:"hogLimitBytes"`
	// BurnerLabels: the names on the burner's series.
	BurnerLabels string `json:"burnerLabels"`
	// PodResources: what List reported for the three pods ("ns-less name:
	// containers"), and its latency.
	PodResources   []string  `json:"podResources"`
	PodResourcesMs []float64 `json:"podResourcesMs"`
	// TopAfterSec: metrics-server's start to `kubectl top pod` listing the
	// burner and the hog (-1: not within topWait); TopBurnerCores,
	// TopHogError: its figures (the hog's against the cgroup's working
	// set); TopPods, TopNode: kubectl's output.
	TopAfterSec    float64 `json:"topAfterSec"`
	TopBurnerCores float64 `json:"topBurnerCores"`
	TopHogError    float64 `json:"topHogWorkingSetError"`
	TopPods        string  `json:"topPods"`
	TopNode        string  `json:"topNode"`
}

// topWait bounds the wait for kubectl top.
const topWait = 2 * time.Minute

func main() {
	p := benchkit.New("ecosystem", "bench-ecosystem")
	p.Namespaces = nsPrefix
	scrapes := flag.Int("scrapes", 20, "scrapes of /metrics/cadvisor per agent")
	flag.StringVar(&dumpDir, "dump", "", "write each agent's last /metrics/cadvisor scrape to DIR/<agent>-cadvisor.txt")
	link := flag.Bool("link-containerd", true, "link /run/containerd/containerd.sock to the stack's containerd while the bench runs (the only address the upstream kubelet's cadvisor looks for containerd at), unless something is there")
	p.Run(func(b *benchkit.Bench) error {
		if *link {
			linked, err := linkContainerd(strings.TrimPrefix(b.Env["CONTAINER_RUNTIME_ENDPOINT"], "unix://"))
			if err != nil {
				return err
			}
			if linked != "" {
				defer os.Remove(linked)
			}
		}
		ctx := context.Background()
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			a, err := nodeagent.Start(b.Spec(name))
			if err != nil {
				return Result{}, err
			}
			r, err := measure(ctx, b, a, name, *scrapes)
			a.Stop()
			if err != nil {
				return r, fmt.Errorf("%w (log %s)", err, a.LogPath())
			}
			log.Printf("%s: %d/%d families (%d in all, %d series), scrape p50 %.0f ms, agent CPU %.1f ms/scrape, pod-resources %v",
				name, r.FamiliesListed, len(nodeagent.CadvisorFamilies), r.Families, r.Series, median(r.ScrapeMs), r.AgentCPUPerScrapeMs, r.PodResources)
			b.Clean(ctx, a.Dir)
			_ = os.RemoveAll(a.Dir)
			return r, nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results))
	})
}

// cadvisorContainerd is where the upstream kubelet's cadvisor looks for
// containerd (cadvisor's --containerd default; the kubelet has no flag for it).
const cadvisorContainerd = "/run/containerd/containerd.sock"

// linkContainerd points cadvisorContainerd at sock when nothing is there,
// and returns the link made ("" when it made none).
func linkContainerd(sock string) (string, error) {
	if _, err := os.Lstat(cadvisorContainerd); err == nil {
		log.Printf("%s exists: left as it is", cadvisorContainerd)
		return "", nil
	}
	if err := os.MkdirAll(filepath.Dir(cadvisorContainerd), 0o711); err != nil {
		return "", err
	}
	if err := os.Symlink(sock, cadvisorContainerd); err != nil {
		return "", err
	}
	log.Printf("linked %s -> %s for the upstream kubelet's cadvisor", cadvisorContainerd, sock)
	return cadvisorContainerd, nil
}

// dumpDir is -dump.
var dumpDir string

func pod(name, node, script string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "c", Image: "docker.io/library/busybox:1.36", Command: []string{"sh", "-c", script}}}},
	}
}

func measure(ctx context.Context, bench *benchkit.Bench, a *nodeagent.Proc, agent string, scrapes int) (Result, error) {
	r := Result{Agent: agent}
	c := bench.Client
	node := bench.Node
	if err := nodeagent.WaitNodeReady(ctx, c, node, a, 2*time.Minute); err != nil {
		return r, err
	}
	nsName, err := nodeagent.CreateNamespace(ctx, c, nsPrefix)
	if err != nil {
		return r, err
	}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
	burner := pod("burner", node, `while :; do :; done`)
	burner.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}
	hog := pod("hog", node, `dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>/dev/null; sleep 3600`)
	hog.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
	side := pod("sidecar", node, `sleep 3600`)
	side.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "docker.io/library/busybox:1.36", Command: []string{"sleep", "3600"}, RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	for _, p := range []*v1.Pod{burner, hog, side} {
		if _, err := c.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return r, err
		}
	}
	ids := map[string]string{}
	if !nodeagent.Poll(2*time.Minute, 200*time.Millisecond, func() bool {
		for _, n := range []string{"burner", "hog", "sidecar"} {
			p, err := c.CoreV1().Pods(ns.Name).Get(ctx, n, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
				return false
			}
			ids[n] = strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
		}
		return true
	}) {
		return r, fmt.Errorf("pods not Running")
	}
	time.Sleep(5 * time.Second)

	// /metrics/cadvisor.
	cpu0 := procCPU(a.Pid())
	var fams map[string]*dto.MetricFamily
	for i := 0; i < scrapes; i++ {
		start := time.Now()
		body, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/metrics/cadvisor").DoRaw(ctx)
		if err != nil {
			return r, fmt.Errorf("scrape: %w", err)
		}
		r.ScrapeMs = append(r.ScrapeMs, float64(time.Since(start).Microseconds())/1000)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		if fams, err = parser.TextToMetricFamilies(strings.NewReader(string(body))); err != nil {
			return r, fmt.Errorf("parse: %w", err)
		}
		if dumpDir != "" && i == scrapes-1 {
			header := fmt.Sprintf("# container IDs: %v\n", ids)
			if err := os.WriteFile(filepath.Join(dumpDir, agent+"-cadvisor.txt"), append([]byte(header), body...), 0o644); err != nil {
				return r, err
			}
		}
	}
	r.AgentCPUPerScrapeMs = (procCPU(a.Pid()) - cpu0) * 1000 / float64(scrapes)
	r.Families = len(fams)
	for n, f := range fams {
		r.Series += len(f.Metric)
		r.Names = append(r.Names, n)
	}
	sort.Strings(r.Names)
	for _, f := range nodeagent.CadvisorFamilies {
		if fams[f] != nil && len(fams[f].Metric) > 0 {
			r.FamiliesListed++
		} else {
			r.Missing = append(r.Missing, f)
		}
	}
	// A container's series: by its cgroup (the id label ends in its
	// container ID), whatever names the agent could give it.
	find := func(name, podName string) (*dto.Metric, bool) {
		for _, m := range fams[name].GetMetric() {
			l := labels(m)
			if strings.HasSuffix(l["id"], ids[podName]) || strings.HasSuffix(l["id"], ids[podName]+".scope") {
				return m, true
			}
		}
		return nil, false
	}
	if m, ok := find("container_cpu_usage_seconds_total", "burner"); ok {
		dir, _ := nodeagent.CgroupOf(ctx, bench.Runtime, ids["burner"], "cpuacct")
		cg := readNum(filepath.Join(dir, "cpuacct.usage")) / 1e9
		r.BurnerCPUError = relErr(value(m), cg)
		l := labels(m)
		r.BurnerLabels = fmt.Sprintf("container=%q pod=%q namespace=%q image=%q", l["container"], l["pod"], strings.TrimPrefix(l["namespace"], nsPrefix), l["image"])
	} else {
		r.BurnerCPUError = -1
	}
	if m, ok := find("container_memory_working_set_bytes", "hog"); ok {
		dir, _ := nodeagent.CgroupOf(ctx, bench.Runtime, ids["hog"], "memory")
		usage := readNum(filepath.Join(dir, "memory.usage_in_bytes"))
		inactive := memStat(filepath.Join(dir, "memory.stat"))["total_inactive_file"]
		r.HogWorkingSetError = relErr(value(m), usage-inactive)
	} else {
		r.HogWorkingSetError = -1
	}
	if m, ok := find("container_spec_memory_limit_bytes", "hog"); ok {
		r.HogLimitBytes = value(m)
	}

	// The pod-resources API.
	sock := filepath.Join(a.Dir, "root", "pod-resources", "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return r, err
	}
	defer conn.Close()
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	for i := 0; i < 10; i++ {
		start := time.Now()
		resp, err := cl.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return r, fmt.Errorf("pod-resources List on %s: %w", sock, err)
		}
		r.PodResourcesMs = append(r.PodResourcesMs, float64(time.Since(start).Microseconds())/1000)
		r.PodResources = nil
		for _, p := range resp.PodResources {
			if p.Namespace != ns.Name {
				continue
			}
			var cs []string
			for _, ct := range p.Containers {
				cs = append(cs, ct.Name)
			}
			r.PodResources = append(r.PodResources, p.Name+":"+strings.Join(cs, ","))
		}
		sort.Strings(r.PodResources)
		time.Sleep(20 * time.Millisecond) // under the rate limit
	}
	return r, top(ctx, bench, &r, ns.Name, node, ids["hog"])
}

// top starts metrics-server and reads kubectl top pod and node.
func top(ctx context.Context, bench *benchkit.Bench, r *Result, ns, node, hogID string) error {
	r.TopAfterSec, r.TopHogError = -1, -1
	ms, err := nodeagent.StartMetricsServer(bench.Env)
	if err != nil {
		return err
	}
	defer ms.Stop()
	start := time.Now()
	row := func(out, name string) []string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == name {
				return f
			}
		}
		return nil
	}
	if !nodeagent.Poll(topWait, time.Second, func() bool {
		out, err := ms.Top("pod", "-n", ns)
		r.TopPods = strings.TrimSpace(out)
		return err == nil && row(out, "burner") != nil && row(out, "hog") != nil
	}) {
		log.Printf("kubectl top pod: %s\nmetrics-server log:\n%s", r.TopPods, ms.Log())
		return nil
	}
	r.TopAfterSec = time.Since(start).Seconds()
	if q, err := resource.ParseQuantity(row(r.TopPods, "burner")[1]); err == nil {
		r.TopBurnerCores = q.AsApproximateFloat64()
	}
	if q, err := resource.ParseQuantity(row(r.TopPods, "hog")[2]); err == nil {
		dir, _ := nodeagent.CgroupOf(ctx, bench.Runtime, hogID, "memory")
		usage := readNum(filepath.Join(dir, "memory.usage_in_bytes"))
		inactive := memStat(filepath.Join(dir, "memory.stat"))["total_inactive_file"]
		r.TopHogError = relErr(q.AsApproximateFloat64(), usage-inactive)
	}
	out, _ := ms.Top("node", node)
	r.TopNode = strings.TrimSpace(out)
	return nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// relErr is |got-want|/want; -1 when want is not known.
func relErr(got, want float64) float64 {
	if want == 0 || math.IsNaN(want) {
		return -1
	}
	return math.Abs(got-want) / want
}

func readNum(path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func memStat(path string) map[string]float64 {
	out := map[string]float64{}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			out[f[0]] = v
		}
	}
	return out
}

// procCPU is the process's user+system CPU time in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func report(results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## What the ecosystem reads, side by side (bench/ecosystem)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/ecosystem` on %s. Each agent joins as node bench-ecosystem and runs a CPU burner\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("limited to 200m, a pod holding 64 MiB of tmpfs under a 128 MiB limit and a pod with a sidecar; `/metrics/cadvisor`\n")
	fmt.Fprintf(&b, "is scraped %d times through the API server's node proxy (as Prometheus does) and the pod-resources API's List\n", len(results[0].ScrapeMs))
	fmt.Fprintf(&b, "called 10 times on `<root-dir>/pod-resources/kubelet.sock`. Families: of the %d dashboards and kube-prometheus\n", len(nodeagent.CadvisorFamilies))
	b.WriteString("rules read (test/agent.CadvisorFamilies). Errors: the burner's CPU and the hog's working set against their cgroups.\n")
	b.WriteString("The upstream kubelet's cadvisor looks for containerd at /run/containerd/containerd.sock only (the kubelet has no flag\n")
	b.WriteString("for it): the bench links that path to the stack's containerd while it runs, as a node with containerd at its\n")
	b.WriteString("default address has it.\n\n")
	b.WriteString("| agent | families listed | families / series in all | scrape p50 (ms) | agent CPU per scrape (ms) | burner CPU error | hog working set error | hog limit | the burner's series' names | pod-resources List | List p50 (ms) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	pct := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f %%", 100*v)
	}
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d of %d | %d / %d | %.1f | %.1f | %s | %s | %.0f Mi | `%s` | %s | %.2f |\n",
			r.Agent, r.FamiliesListed, len(nodeagent.CadvisorFamilies), r.Families, r.Series, median(r.ScrapeMs), r.AgentCPUPerScrapeMs,
			pct(r.BurnerCPUError), pct(r.HogWorkingSetError), r.HogLimitBytes/(1<<20), r.BurnerLabels, strings.Join(r.PodResources, " "), median(r.PodResourcesMs))
	}
	b.WriteString("\nmetrics-server (v0.8.0, checking the agent's serving certificate against the cluster CA) started for each agent:\n")
	b.WriteString("seconds until `kubectl top pod` lists the burner and the hog, and its figures (the hog's against its cgroup's working set).\n\n")
	b.WriteString("| agent | metrics-server start -> kubectl top pod | burner (cores) | hog working set error | kubectl top node |\n|---|---|---|---|---|\n")
	for _, r := range results {
		after := "not within the wait"
		if r.TopAfterSec >= 0 {
			after = fmt.Sprintf("%.0f s", r.TopAfterSec)
		}
		nodeRow := ""
		if lines := strings.Split(r.TopNode, "\n"); len(lines) == 2 {
			nodeRow = "`" + strings.Join(strings.Fields(lines[1]), " ") + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %.3f | %s | %s |\n", r.Agent, after, r.TopBurnerCores, pct(r.TopHogError), nodeRow)
	}
	for _, r := range results {
		if len(r.Missing) > 0 {
			fmt.Fprintf(&b, "\n%s does not serve: %s.\n", r.Agent, strings.Join(r.Missing, ", "))
		}
	}
	// The families one agent serves and the other does not.
	if len(results) == 2 {
		for i, r := range results {
			other := map[string]bool{}
			for _, n := range results[1-i].Names {
				other[n] = true
			}
			var only []string
			for _, n := range r.Names {
				if !other[n] {
					only = append(only, "`"+n+"`")
				}
			}
			if len(only) > 0 {
				fmt.Fprintf(&b, "\nOnly %s serves (%d): %s.\n", r.Agent, len(only), strings.Join(only, ", "))
			}
		}
	}
	return b.String()
}
