// Command csiregistration measures CSI driver registration side by side:
// nodelet and the upstream kubelet, in turn, run as node bench-csireg with
// the same KubeletConfiguration, and the project's driver
// (test/fakes/hostpathcsi) registers itself in the agent's
// <root-dir>/plugins_registry. Per run: seconds from the driver's start to
// its entry in the CSINode; with a driver whose first two NodeGetInfo
// calls fail, whether (and when) it gets registered anyway; and seconds
// from the driver's exit (its sockets removed) to its removal from the
// CSINode. It writes the runs as JSON and a Markdown section.
//
//	go run ./bench/csiregistration -doc docs/benchmarks.md
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
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const driverName = "hostpath.csi.nodelet.dev"

// Run is one agent's run, in seconds (-1: never, within the wait).
type Run struct {
	Register       float64 `json:"register"`
	RegisterRetry  float64 `json:"registerAfterFailedNodeGetInfo"`
	Deregister     float64 `json:"deregister"`
	RetryWaitLimit float64 `json:"retryWaitLimit"`
}

// AgentResult is one agent's runs.
type AgentResult struct {
	Agent string `json:"agent"`
	Runs  []Run  `json:"runs"`
}

const retryWait = 60 * time.Second

func main() {
	p := benchkit.New("csiregistration", "bench-csireg")
	reps := flag.Int("reps", 3, "runs per agent")
	p.Run(func(b *benchkit.Bench) error {
		driver, err := framework.BuildTool("./test/fakes/hostpathcsi")
		if err != nil {
			return err
		}
		results, err := benchkit.Each(b, func(name string) (AgentResult, error) {
			runs, err := benchkit.Repeat(context.Background(), b, *reps, func(i int) (Run, error) {
				run, err := measure(b, name, driver)
				if err == nil {
					log.Printf("%s run %d: %+v", name, i, run)
				}
				return run, err
			})
			return AgentResult{Agent: name, Runs: runs}, err
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

func measure(b *benchkit.Bench, name, driver string) (Run, error) {
	run := Run{Register: -1, RegisterRetry: -1, Deregister: -1, RetryWaitLimit: retryWait.Seconds()}
	node := b.Node
	a, err := nodeagent.Start(b.Spec(name))
	if err != nil {
		return run, err
	}
	defer func() {
		a.Stop()
		framework.UnmountUnder(a.Dir, log.Printf)
		_ = os.RemoveAll(a.Dir)
		_ = b.Client.StorageV1().CSINodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	}()
	if err := nodeagent.WaitNodeReady(context.Background(), b.Client, node, a, 2*time.Minute); err != nil {
		return run, err
	}
	registry := filepath.Join(a.Dir, "root", "plugins_registry")
	registered := func() bool { return nodeagent.InCSINode(b.Client, node, driverName) }

	d, err := nodeagent.StartCSIDriver(driver, registry, node)
	if err != nil {
		return run, err
	}
	start := time.Now()
	if nodeagent.Poll(30*time.Second, 50*time.Millisecond, registered) {
		run.Register = time.Since(start).Seconds()
	}
	stopped := d.Stop()
	if nodeagent.Poll(30*time.Second, 50*time.Millisecond, func() bool { return !registered() }) {
		run.Deregister = time.Since(stopped).Seconds()
	}

	d, err = nodeagent.StartCSIDriver(driver, registry, node, "-fail-node-get-info", "2")
	if err != nil {
		return run, err
	}
	start = time.Now()
	if nodeagent.Poll(retryWait, 100*time.Millisecond, registered) {
		run.RegisterRetry = time.Since(start).Seconds()
	}
	d.Stop()
	return run, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// column is the median over the runs where it happened, and how many did.
func column(runs []Run, f func(Run) float64) string {
	var v []float64
	for _, r := range runs {
		if x := f(r); x >= 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return fmt.Sprintf("never (0/%d)", len(runs))
	}
	return fmt.Sprintf("%.2f (%d/%d)", median(v), len(v), len(runs))
}

func report(results []AgentResult, now time.Time) string {
	var b strings.Builder
	b.WriteString("## CSI driver registration, side by side (bench/csiregistration)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/csiregistration` on %s. Each agent runs as node bench-csireg; the project's\n", now.UTC().Format("2006-01-02"))
	b.WriteString("driver (test/fakes/hostpathcsi) registers itself in the agent's `plugins_registry`. Seconds, median over the\n")
	fmt.Fprintf(&b, "runs where it happened (runs where it did): the driver in the CSINode after its start; the same with a driver whose\n")
	fmt.Fprintf(&b, "first two NodeGetInfo calls fail (waited for %v); the driver out of the CSINode after it exited.\n\n", retryWait)
	b.WriteString("| agent | registered | registered after 2 failed NodeGetInfo | deregistered |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Agent,
			column(r.Runs, func(x Run) float64 { return x.Register }),
			column(r.Runs, func(x Run) float64 { return x.RegisterRetry }),
			column(r.Runs, func(x Run) float64 { return x.Deregister }))
	}
	return b.String()
}
