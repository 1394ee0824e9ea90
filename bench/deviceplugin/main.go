// Command deviceplugin runs the device plugin scenario side by side:
// nodelet and the upstream kubelet, in turn, run as node bench-devices with
// the same KubeletConfiguration, and the sample device plugin
// (test/fakes/deviceplugin, two fake devices, GetPreferredAllocation and
// PreStartContainer on) registers with the agent's kubelet.sock (nodelet:
// <root-dir>/device-plugins; upstream: /var/lib/kubelet/device-plugins,
// whatever its root dir). Per agent, seconds from: the
// plugin's start to the node's allocatable 2; a pod asking for a device
// created to Running (and whether its container has the device's mount,
// node and env); the agent restarted to allocatable 2 again (and whether
// the pod kept its container and device); a device marked unhealthy to
// allocatable 1; the plugin stopped to allocatable 0. And how a pod asking
// for more than is left is refused. It writes JSON and a Markdown section.
//
//	go run ./bench/deviceplugin -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both).
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
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	res      = "example.com/resource"
	nsPrefix = "bench-devices-"
	wait     = 60 * time.Second
)

// Result is one agent's run; seconds are -1 when it did not happen within
// the wait.
type Result struct {
	Agent           string  `json:"agent"`
	Runs            int     `json:"runs"`
	Registered      float64 `json:"pluginStartToAllocatable"`
	PodRunning      float64 `json:"podCreateToRunning"`
	DeviceInPod     bool    `json:"deviceMountNodeEnvInContainer"`
	Preferred       bool    `json:"preferredDeviceGiven"`
	PreStart        bool    `json:"preStartContainerCalled"`
	Refusal         string  `json:"refusedPodReason"`
	Reregistered    float64 `json:"agentRestartToAllocatable"`
	KeptContainer   bool    `json:"podKeptContainerAcrossRestart"`
	Unhealthy       float64 `json:"unhealthyToAllocatable1"`
	PluginGone      float64 `json:"pluginStopToAllocatable0"`
	CapacityAfter   int64   `json:"capacityAfterPluginStop"`
	WaitLimitSecond float64 `json:"waitLimit"`
}

func main() {
	p := benchkit.New("deviceplugin", "bench-devices")
	p.Namespaces = nsPrefix
	reps := flag.Int("reps", 3, "runs per agent (the figures are medians, a yes is a yes in every run)")
	p.Run(func(b *benchkit.Bench) error {
		plugin, err := framework.BuildTool("./test/fakes/deviceplugin")
		if err != nil {
			return err
		}
		ctx := context.Background()
		// What an interrupted run left (the Node would carry its counts).
		b.Clean(ctx, "")
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			runs, err := benchkit.Repeat(ctx, b, *reps, func(i int) (Result, error) {
				r, err := measure(b, name, plugin, fmt.Sprintf("%s%s-%d", nsPrefix, name, i))
				if err == nil {
					log.Printf("%s run %d: %+v", name, i, r)
				}
				return r, err
			})
			if err != nil {
				return Result{}, err
			}
			return medianOf(runs), nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

func devicePod(name, node, image string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	zero := int64(0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &zero, Containers: []v1.Container{{
			Name: "c", Image: image, Command: []string{"sh", "-c", "sleep 3600"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{res: q}, Requests: v1.ResourceList{res: q}},
		}}},
	}
}

func since(start time.Time, ok bool) float64 {
	if !ok {
		return -1
	}
	return time.Since(start).Seconds()
}

func measure(b *benchkit.Bench, name, pluginBin, ns string) (Result, error) {
	r := Result{Agent: name, Registered: -1, PodRunning: -1, Reregistered: -1, Unhealthy: -1, PluginGone: -1, CapacityAfter: -1, WaitLimitSecond: wait.Seconds()}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agent-"+name+"-")
	if err != nil {
		return r, err
	}
	devDir, err := os.MkdirTemp("", "devices-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(devDir)
	if name == nodeagent.Upstream {
		// A fresh start: what a previous run's kubelet kept.
		_ = os.Remove(filepath.Join(nodeagent.UpstreamDevicePluginDir, "kubelet_internal_checkpoint"))
	}
	node := b.Node
	spec := b.Spec(name)
	spec.Dir = dir
	a, err := nodeagent.Start(spec)
	if err != nil {
		return r, err
	}
	defer func() {
		a.Stop()
		framework.UnmountUnder(dir, log.Printf)
		_ = os.RemoveAll(dir)
	}()
	if err := nodeagent.WaitNodeReady(ctx, b.Client, node, a, 2*time.Minute); err != nil {
		return r, err
	}
	c := b.Client.CoreV1()
	counts := func() (int64, int64) {
		n, err := c.Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return -1, -1
		}
		cq, ok := n.Status.Capacity[res]
		if !ok {
			return -1, -1
		}
		aq := n.Status.Allocatable[res]
		return cq.Value(), aq.Value()
	}
	allocatable := func(want int64) func() bool {
		return func() bool { _, a := counts(); return a == want }
	}
	if _, err := nodeagent.CreateNamespace(ctx, b.Client, ns); err != nil {
		return r, err
	}

	pluginDir := nodeagent.DevicePluginDir(name, filepath.Join(dir, "root"))
	start := time.Now()
	p, err := nodeagent.StartDevicePlugin(pluginBin, pluginDir, devDir, "-prefer", "-prestart")
	if err != nil {
		return r, err
	}
	defer p.Stop()
	r.Registered = since(start, nodeagent.Poll(wait, 50*time.Millisecond, allocatable(2)))

	image := b.Env["BUSYBOX_IMAGE"]
	start = time.Now()
	if _, err := c.Pods(ns).Create(ctx, devicePod("one", node, image, 1), metav1.CreateOptions{}); err != nil {
		return r, err
	}
	running := func(pod string) *runtimeapi.Container {
		cs, err := b.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
			"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod}})
		if err != nil {
			return nil
		}
		for _, ct := range cs {
			if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return ct
			}
		}
		return nil
	}
	r.PodRunning = since(start, nodeagent.Poll(wait, 50*time.Millisecond, func() bool {
		pod, err := c.Pods(ns).Get(ctx, "one", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == v1.PodRunning
	}))
	ct := running("one")
	if ct != nil {
		out, _, err := b.Runtime.ExecSync(ctx, ct.Id, []string{"sh", "-c", "echo $FAKE_DEVICES; cat /fake/*; test -c /dev/fake-$FAKE_DEVICES && echo node"}, 10*time.Second)
		got := strings.Fields(string(out))
		r.DeviceInPod = err == nil && len(got) == 3 && got[0] == got[1] && got[2] == "node"
		r.Preferred = len(got) > 0 && got[0] == "Dev-2"
	}
	if pre, err := os.ReadFile(filepath.Join(devDir, "prestart.log")); err == nil {
		r.PreStart = strings.TrimSpace(string(pre)) == "Dev-2"
	}
	if _, err := c.Pods(ns).Create(ctx, devicePod("greedy", node, image, 2), metav1.CreateOptions{}); err != nil {
		return r, err
	}
	if nodeagent.Poll(wait, 100*time.Millisecond, func() bool {
		pod, err := c.Pods(ns).Get(ctx, "greedy", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == v1.PodFailed
	}) {
		pod, _ := c.Pods(ns).Get(ctx, "greedy", metav1.GetOptions{})
		r.Refusal = pod.Status.Reason
	}

	// The agent restarted.
	before := ct
	a.Stop()
	start = time.Now()
	if a, err = nodeagent.Start(spec); err != nil {
		return r, err
	}
	r.Reregistered = since(start, nodeagent.Poll(wait, 50*time.Millisecond, func() bool {
		// The plugin registered again (the Node still shows the count of
		// before the restart until the agent writes a new one).
		_, al := counts()
		return strings.Count(p.Log(), "registered "+res) >= 2 && al == 2
	}))
	if after := running("one"); before != nil && after != nil {
		r.KeptContainer = after.Id == before.Id
	}

	if err := p.SetHealthy("Dev-1", false); err != nil {
		return r, err
	}
	start = time.Now()
	r.Unhealthy = since(start, nodeagent.Poll(wait, 50*time.Millisecond, allocatable(1)))
	p.Stop()
	start = time.Now()
	r.PluginGone = since(start, nodeagent.Poll(wait, 50*time.Millisecond, allocatable(0)))
	r.CapacityAfter, _ = counts()
	return r, nil
}

// medianOf is the runs' medians (a time not had in a run counts as
// never), yes when every run said yes, the first run's refusal.
func medianOf(runs []Result) Result {
	out := runs[0]
	out.Runs = len(runs)
	med := func(f func(Result) float64) float64 {
		var v []float64
		for _, r := range runs {
			x := f(r)
			if x < 0 {
				x = math.Inf(1)
			}
			v = append(v, x)
		}
		sort.Float64s(v)
		m := v[len(v)/2]
		if math.IsInf(m, 1) {
			return -1
		}
		return m
	}
	out.Registered = med(func(r Result) float64 { return r.Registered })
	out.PodRunning = med(func(r Result) float64 { return r.PodRunning })
	out.Reregistered = med(func(r Result) float64 { return r.Reregistered })
	out.Unhealthy = med(func(r Result) float64 { return r.Unhealthy })
	out.PluginGone = med(func(r Result) float64 { return r.PluginGone })
	for _, r := range runs {
		out.DeviceInPod = out.DeviceInPod && r.DeviceInPod
		out.Preferred = out.Preferred && r.Preferred
		out.PreStart = out.PreStart && r.PreStart
		out.KeptContainer = out.KeptContainer && r.KeptContainer
	}
	return out
}

func secs(v float64) string {
	if v < 0 {
		return "not within the wait"
	}
	return fmt.Sprintf("%.2f", v)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func report(results []Result, now time.Time) string {
	var b strings.Builder
	b.WriteString("## Device plugins, side by side (bench/deviceplugin)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/deviceplugin` on %s. Each agent runs as node bench-devices with the same\n", now.UTC().Format("2006-01-02"))
	b.WriteString("KubeletConfiguration (node status every 10 s, the default); the sample device plugin (test/fakes/deviceplugin: two fake\n")
	b.WriteString("devices, GetPreferredAllocation preferring the highest ID, PreStartContainer) registers with the agent's\n")
	fmt.Fprintf(&b, "`device-plugins/kubelet.sock`. Seconds (waited for %v at most), medians of %d runs; yes: in every run.\n\n", wait, results[0].Runs)
	b.WriteString("| | " + strings.Join(names(results), " | ") + " |\n|---|" + strings.Repeat("---|", len(results)) + "\n")
	row := func(label string, f func(Result) string) {
		var cells []string
		for _, r := range results {
			cells = append(cells, f(r))
		}
		b.WriteString("| " + label + " | " + strings.Join(cells, " | ") + " |\n")
	}
	row("plugin start -> node allocatable 2", func(r Result) string { return secs(r.Registered) })
	row("pod with a device: created -> Running", func(r Result) string { return secs(r.PodRunning) })
	row("device's mount, node and env in the container", func(r Result) string { return yes(r.DeviceInPod) })
	row("the plugin's preferred device given", func(r Result) string { return yes(r.Preferred) })
	row("PreStartContainer called with it", func(r Result) string { return yes(r.PreStart) })
	row("pod asking for 2 more: refused as", func(r Result) string { return "`" + r.Refusal + "`" })
	row("agent restart -> plugin registered again, allocatable 2", func(r Result) string { return secs(r.Reregistered) })
	row("pod kept its container across the restart", func(r Result) string { return yes(r.KeptContainer) })
	row("device unhealthy -> allocatable 1", func(r Result) string { return secs(r.Unhealthy) })
	row("plugin stopped -> allocatable 0", func(r Result) string { return secs(r.PluginGone) })
	row("capacity after the plugin stopped", func(r Result) string { return fmt.Sprint(r.CapacityAfter) })
	return b.String()
}

func names(results []Result) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Agent)
	}
	return out
}
