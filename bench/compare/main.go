// Command compare benchmarks nodelet against the upstream kubelet, side by
// side, on the local stack (containerd) and control plane (`make
// cluster-up`). It runs each agent in turn as node bench-node with the same
// KubeletConfiguration, runs the scenarios of the benchmark issue against it
// (startup burst, footprint, restart latency, deletion, scale), cleans up
// between agents (node, pods, sandboxes, kubepods cgroups, host sysctls),
// then writes the raw results as JSON, a Markdown section with the table of
// both agents and the ratio nodelet/upstream, and PNG charts.
//
//	go run ./bench/compare -reps 3 -scale 250
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

type options struct {
	*benchkit.Program
	reps      int
	burst     int
	delPods   int
	direct    bool
	scale     []int
	window    time.Duration
	docsDir   string
	profile   bool
	report    bool
	burstWait time.Duration
	floor     [][2]int // pods, concurrency (0: all at once)
	floorOnly bool
}

func main() {
	o := options{Program: benchkit.New("compare", "bench-node")}
	// The CRI client logs through klog: its errors for containers the
	// agents removed meanwhile are expected here.
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("logtostderr", "false")
	_ = kfs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	var scale, floor string
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each scenario (medians are reported)")
	flag.IntVar(&o.burst, "burst", 100, "pods of the startup burst")
	flag.IntVar(&o.delPods, "delete-pods", 20, "pods of the deletion scenario")
	flag.BoolVar(&o.direct, "direct", true, "also run each burst with spec.nodeName set (no scheduler), and profile that one")
	flag.StringVar(&scale, "scale", "250", "comma-separated pod counts of the scale scenario (empty: skip)")
	flag.DurationVar(&o.window, "window", 60*time.Second, "footprint measurement window (idle and steady)")
	flag.StringVar(&o.docsDir, "docs-dir", "docs", "where charts and profiles go")
	flag.BoolVar(&o.profile, "profile", true, "capture a CPU profile of each agent during an extra (unmeasured) burst")
	flag.BoolVar(&o.report, "report-only", false, "only rewrite the section and charts from -out")
	flag.DurationVar(&o.burstWait, "burst-timeout", 5*time.Minute, "how long a burst may take")
	flag.StringVar(&floor, "floor", "100:0,100:4,100:8,100:16,500:8", "runtime floor bursts (pods:concurrency, 0 = all at once), straight through the CRI with no agent")
	flag.BoolVar(&o.floorOnly, "floor-only", false, "only run the runtime floor bursts (and the deletion floor) and print them")
	o.Parse()
	for _, f := range strings.Split(floor, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var pods, conc int
		if _, err := fmt.Sscanf(f, "%d:%d", &pods, &conc); err != nil {
			log.Fatalf("-floor %q: want pods:concurrency", f)
		}
		o.floor = append(o.floor, [2]int{pods, conc})
	}
	for _, s := range strings.Split(scale, ",") {
		if s = strings.TrimSpace(s); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				log.Fatalf("-scale: %v", err)
			}
			o.scale = append(o.scale, n)
		}
	}

	if o.report {
		res, err := loadResults(o.Out)
		if err != nil {
			log.Fatal(err)
		}
		if err := writeReport(&o, res); err != nil {
			log.Fatal(err)
		}
		return
	}
	if os.Geteuid() != 0 {
		log.Fatal("compare needs root (it runs node agents)")
	}
	env, err := loadEnv()
	if err != nil {
		log.Fatal(err)
	}
	h, err := newHarness(&o, env)
	if err != nil {
		log.Fatal(err)
	}
	// Whatever happens, the host sysctls the upstream kubelet rewrites come
	// back and no agent is left running.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		log.Print("interrupted: stopping the agent, restoring sysctls")
		h.abort()
		os.Exit(2)
	}()
	res := h.machineFacts()
	if o.floorOnly {
		for _, f := range o.floor {
			if _, err := h.runtimeFloor(context.Background(), f[0], f[1]); err != nil {
				log.Fatal(err)
			}
		}
		for _, conc := range []int{o.delPods, 4, 1} {
			if o.delPods == 0 {
				break
			}
			if _, err := h.deletionFloor(context.Background(), o.delPods, conc); err != nil {
				log.Fatal(err)
			}
		}
		for _, requests := range []bool{false, true} {
			if _, err := h.apiFloor(context.Background(), o.burst, requests); err != nil {
				log.Fatal(err)
			}
		}
		return
	}
	// The runtime alone, before the agents and again after them (the
	// report takes the faster of the two): what no agent can beat on this
	// machine, measured in the state the agents started from and in the one
	// they left.
	floors := func(when string) {
		for _, f := range o.floor {
			fl, err := h.runtimeFloor(context.Background(), f[0], f[1])
			if err != nil {
				log.Fatalf("runtime floor: %v", err)
			}
			fl.When = when
			res.Floor = append(res.Floor, fl)
		}
		if o.direct {
			for _, requests := range []bool{false, true} {
				af, err := h.apiFloor(context.Background(), o.burst, requests)
				if err != nil {
					log.Fatalf("API floor: %v", err)
				}
				af.When = when
				res.APIFloor = append(res.APIFloor, af)
			}
		}
		if o.delPods > 0 {
			for _, conc := range []int{o.delPods, 4, 1} {
				df, err := h.deletionFloor(context.Background(), o.delPods, conc)
				if err != nil {
					log.Fatalf("deletion floor: %v", err)
				}
				df.When = when
				res.DeletionFloor = append(res.DeletionFloor, df)
			}
		}
	}
	floors("before the agents")
	ran, err := h.runAgents(context.Background(), func(partial []*AgentResult) {
		// Partial results are kept as soon as they exist.
		res.Agents = partial
		if err := saveResults(o.Out, res); err != nil {
			log.Printf("saving partial results: %v", err)
		}
	})
	if err != nil {
		h.abort()
		log.Fatal(err)
	}
	res.Agents = ran
	h.restoreHost()
	floors("after the agents")
	if err := saveResults(o.Out, res); err != nil {
		log.Fatal(err)
	}
	if err := writeReport(&o, res); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s, %s and the charts in %s", o.Out, o.Section, o.docsDir)
}

// loadEnv reads the `export K="V"` lines of .stack/env.
func loadEnv() (map[string]string, error) {
	env, err := framework.ReadEnvFile(filepath.Join(".stack", "env"))
	if err != nil {
		return nil, fmt.Errorf("the stack is not up (run from the repository root after hack/cluster/up.sh): %w", err)
	}
	for _, k := range []string{"CONTAINER_RUNTIME_ENDPOINT", "NODE_IP", "KUBECONFIG", "K8S_BIN", "CLUSTER_PKI", "BUSYBOX_IMAGE", "PAUSE_IMAGE"} {
		if env[k] == "" {
			return nil, fmt.Errorf(".stack/env lacks %s: run hack/stack-up.sh and hack/cluster/up.sh", k)
		}
	}
	return env, nil
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
