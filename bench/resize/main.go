// Command resize measures in-place pod resizes side by side: nodelet and
// the upstream kubelet, in turn, run as node bench-resize with the same
// KubeletConfiguration; a Burstable pod (cpu 100m request, memory 32Mi
// request) is resized -resizes times through the resize subresource, its
// CPU limit and memory limit alternating between 200m/64Mi and
// 300m/96Mi. For each resize, milliseconds from the patch's answer to the
// container's cgroup having the new CFS quota (read from the host), and
// to the API's status.containerStatuses[].resources having the new CPU
// limit with no resize condition left; p50 and p99 of each, and whether
// the container kept running without a restart. It writes JSON and a
// Markdown section.
//
//	go run ./bench/resize -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both).
package main

import (
	"context"
	"encoding/json"
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

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	nsPrefix = "bench-resize-"
	wait     = 30 * time.Second
)

// Result is one agent's figures, in milliseconds.
type Result struct {
	Agent        string  `json:"agent"`
	Resizes      int     `json:"resizes"`
	CgroupP50    float64 `json:"patchToCgroupP50Ms"`
	CgroupP99    float64 `json:"patchToCgroupP99Ms"`
	StatusP50    float64 `json:"patchToStatusP50Ms"`
	StatusP99    float64 `json:"patchToStatusP99Ms"`
	Missed       int     `json:"notWithinWait"`
	NoRestart    bool    `json:"containerNeverRestarted"`
	WaitLimitSec float64 `json:"waitLimit"`
}

func main() {
	p := benchkit.New("resize", "bench-resize")
	p.Namespaces = nsPrefix
	n := flag.Int("resizes", 50, "resizes per agent")
	p.Run(func(b *benchkit.Bench) error {
		ctx := context.Background()
		b.Clean(ctx, "")
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			runs, err := benchkit.Repeat(ctx, b, 1, func(int) (Result, error) { return measure(b, name, *n) })
			if err != nil {
				return Result{}, err
			}
			log.Printf("%s: %+v", name, runs[0])
			return runs[0], nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

// quotaOf reads the CFS quota of the cgroup of pid (cgroup v1's cpu
// controller or v2's cpu.max).
func quotaOf(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
				continue // hybrid: the v1 cpu controller below
			}
			raw, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[2], "cpu.max"))
			if err != nil {
				return 0, err
			}
			f := strings.Fields(string(raw))
			if f[0] == "max" {
				return -1, nil
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
		if strings.Contains(","+parts[1]+",", ",cpu,") {
			raw, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", parts[2], "cpu.cfs_quota_us"))
			if err != nil {
				return 0, err
			}
			return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		}
	}
	return 0, fmt.Errorf("pid %d: no cpu cgroup", pid)
}

func measure(b *benchkit.Bench, name string, resizes int) (Result, error) {
	r := Result{Agent: name, Resizes: resizes, NoRestart: true, WaitLimitSec: wait.Seconds()}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agent-"+name+"-")
	if err != nil {
		return r, err
	}
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
	if err := nodeagent.WaitNodeReady(ctx, b.Client, b.Node, a, 2*time.Minute); err != nil {
		return r, err
	}
	ns := nsPrefix + name
	if _, err := nodeagent.CreateNamespace(ctx, b.Client, ns); err != nil {
		return r, err
	}
	c := b.Client.CoreV1().Pods(ns)
	zero := int64(0)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rz"}, Spec: v1.PodSpec{NodeName: b.Node, TerminationGracePeriodSeconds: &zero,
		Containers: []v1.Container{{Name: "c", Image: b.Env["BUSYBOX_IMAGE"], Command: []string{"sh", "-c", "sleep 3600"},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			}}}}}
	if _, err := c.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	var ctr *runtimeapi.Container
	if !nodeagent.Poll(2*time.Minute, 100*time.Millisecond, func() bool {
		cs, err := b.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
			"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": "rz"}})
		for _, x := range cs {
			if err == nil && x.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				ctr = x
			}
		}
		return ctr != nil
	}) {
		return r, fmt.Errorf("the pod's container is not running")
	}
	pid, err := containerPid(ctx, b, ctr.Id)
	if err != nil {
		return r, err
	}
	var toCgroup, toStatus []float64
	for i := 0; i < resizes; i++ {
		cpu, mem := "300m", "96Mi"
		if i%2 == 1 {
			cpu, mem = "200m", "64Mi"
		}
		want := resource.MustParse(cpu)
		quota := want.MilliValue() * 100
		body := fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":%q,"memory":%q}}}]}}`, cpu, mem)
		if _, err := c.Patch(ctx, "rz", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "resize"); err != nil {
			return r, err
		}
		start := time.Now()
		if nodeagent.Poll(wait, 5*time.Millisecond, func() bool { q, err := quotaOf(pid); return err == nil && q == quota }) {
			toCgroup = append(toCgroup, float64(time.Since(start).Microseconds())/1000)
		} else {
			r.Missed++
			toCgroup = append(toCgroup, math.Inf(1))
		}
		if nodeagent.Poll(wait, 10*time.Millisecond, func() bool {
			p, err := c.Get(ctx, "rz", metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Resources == nil {
				return false
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodResizePending || cond.Type == v1.PodResizeInProgress {
					return false
				}
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount != 0 {
				r.NoRestart = false
			}
			got := cs.Resources.Limits[v1.ResourceCPU]
			return got.Equal(want)
		}) {
			toStatus = append(toStatus, float64(time.Since(start).Microseconds())/1000)
		} else {
			r.Missed++
			toStatus = append(toStatus, math.Inf(1))
		}
	}
	r.CgroupP50, r.CgroupP99 = percentile(toCgroup, 50), percentile(toCgroup, 99)
	r.StatusP50, r.StatusP99 = percentile(toStatus, 50), percentile(toStatus, 99)
	return r, nil
}

// containerPid is the host PID of the container's process, from the
// runtime's verbose status.
func containerPid(ctx context.Context, b *benchkit.Bench, id string) (int, error) {
	st, err := b.Runtime.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid == 0 {
		return 0, fmt.Errorf("no pid in the runtime's info of %s: %v", id, err)
	}
	return info.Pid, nil
}

// percentile is the nearest-rank percentile of v (-1 when it is a miss).
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	if math.IsInf(s[i], 1) {
		return -1
	}
	return s[i]
}

func ms(v float64) string {
	if v < 0 {
		return "not within the wait"
	}
	return fmt.Sprintf("%.0f", v)
}

func report(results []Result, now time.Time) string {
	var b strings.Builder
	b.WriteString("## In-place resize, side by side (bench/resize)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/resize` on %s. Each agent runs as node bench-resize with the same\n", now.UTC().Format("2006-01-02"))
	b.WriteString("KubeletConfiguration; one Burstable pod (cpu 100m, memory 32Mi requested) has its CPU and memory limits\n")
	fmt.Fprintf(&b, "patched %d times through the resize subresource, alternating 200m/64Mi and 300m/96Mi. Milliseconds from\n", results[0].Resizes)
	fmt.Fprintf(&b, "the patch's answer (waited for %v at most each).\n\n", wait)
	b.WriteString("| | " + strings.Join(names(results), " | ") + " |\n|---|" + strings.Repeat("---|", len(results)) + "\n")
	row := func(label string, f func(Result) string) {
		var cells []string
		for _, r := range results {
			cells = append(cells, f(r))
		}
		b.WriteString("| " + label + " | " + strings.Join(cells, " | ") + " |\n")
	}
	row("patch -> the container's CFS quota changed, p50", func(r Result) string { return ms(r.CgroupP50) })
	row("patch -> the container's CFS quota changed, p99", func(r Result) string { return ms(r.CgroupP99) })
	row("patch -> `status.containerStatuses[].resources` updated, no resize condition, p50", func(r Result) string { return ms(r.StatusP50) })
	row("patch -> `status.containerStatuses[].resources` updated, no resize condition, p99", func(r Result) string { return ms(r.StatusP99) })
	row("resizes not done within the wait", func(r Result) string { return fmt.Sprint(r.Missed) })
	row("container never restarted", func(r Result) string {
		if r.NoRestart {
			return "yes"
		}
		return "no"
	})
	return b.String()
}

func names(results []Result) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Agent)
	}
	return out
}
