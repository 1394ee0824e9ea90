// Command bootstrap measures TLS bootstrap side by side: nodelet and the
// upstream kubelet, in turn, join the stack's control plane as node
// bench-bootstrap with only the bootstrap token (--bootstrap-kubeconfig,
// rotateCertificates: true, the same KubeletConfiguration otherwise), and
// the time from the agent's start to its Node Ready is recorded (the
// client CSR sent, auto-approved and signed by the controller manager, the
// kubeconfig written, the node registered). It writes the runs as JSON and
// a Markdown section with both agents' medians.
//
//	go run ./bench/bootstrap -doc docs/benchmarks.md
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
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagent "github.com/nodelet/nodelet/test/agent"
)

const (
	sectionBegin = "<!-- bootstrap: begin (bench/bootstrap) -->"
	sectionEnd   = "<!-- bootstrap: end -->"
)

// Result is one agent's runs: seconds from start to Node Ready.
type Result struct {
	Agent   string    `json:"agent"`
	Seconds []float64 `json:"secondsToReady"`
}

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	agents := flag.String("agents", "upstream,nodelet", "agents to run, in order")
	reps := flag.Int("reps", 5, "runs per agent")
	out := flag.String("out", "bench/results/bootstrap.json", "raw results (JSON)")
	section := flag.String("section", "bench/results/bootstrap.md", "Markdown section written from the results")
	doc := flag.String("doc", "", "also put the section into this Markdown page (replacing a previous one)")
	node := flag.String("node", "bench-bootstrap", "node name")
	flag.Parse()
	bench, err := nodeagent.PrepareBench("bootstrap", "BOOTSTRAP_KUBECONFIG")
	if err != nil {
		log.Fatal(err)
	}
	defer bench.Close()
	env, client, rt := bench.Env, bench.Client, bench.Runtime
	ctx := context.Background()
	cleaner := nodeagent.Cleaner{Client: client, Runtime: rt, Node: *node, Mine: func(string) bool { return false }}
	var results []Result
	for _, name := range strings.Split(*agents, ",") {
		b := bench.Binary(name)
		r := Result{Agent: name}
		for i := 0; i < *reps; i++ {
			start := time.Now()
			a, err := nodeagent.Start(nodeagent.Spec{Name: name, Binary: b, Node: *node, Env: env, MaxPods: 20, Bootstrap: true,
				ExtraConfig: "rotateCertificates: true\n"})
			if err != nil {
				log.Fatal(err)
			}
			err = nodeagent.WaitNodeReady(ctx, client, *node, a, 2*time.Minute)
			took := time.Since(start).Seconds()
			a.Stop()
			if err != nil {
				log.Fatalf("%s run %d: %v (log %s)", name, i, err, a.LogPath())
			}
			// It did bootstrap: a client CSR of the bootstrap token's.
			bootstrapCSRs := 0
			if csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err == nil {
				for _, c := range csrs.Items {
					if strings.HasPrefix(c.Spec.Username, "system:bootstrap:") && c.Spec.SignerName == "kubernetes.io/kube-apiserver-client-kubelet" {
						bootstrapCSRs++
					}
				}
			}
			if bootstrapCSRs == 0 {
				log.Fatalf("%s run %d: Ready without a bootstrap CSR (log %s)", name, i, a.LogPath())
			}
			log.Printf("%s run %d: start -> node Ready %.2f s (%d bootstrap CSR)", name, i, took, bootstrapCSRs)
			r.Seconds = append(r.Seconds, took)
			if err := cleaner.CleanNode(ctx, a.Dir); err != nil {
				log.Printf("cleanup: %v", err)
			}
			bench.Host.RestoreSysctls()
			// The node's CSRs go too: the next run starts from nothing.
			csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, c := range csrs.Items {
					if strings.HasSuffix(c.Spec.Username, ":"+*node) || strings.HasPrefix(c.Spec.Username, "system:bootstrap:") {
						_ = client.CertificatesV1().CertificateSigningRequests().Delete(ctx, c.Name, metav1.DeleteOptions{})
					}
				}
			}
			_ = os.RemoveAll(a.Dir)
		}
		results = append(results, r)
	}
	if err := nodeagent.WriteResults(results, *out, *section, *doc, sectionBegin, sectionEnd, report(results)); err != nil {
		log.Fatal(err)
	}
}

func report(results []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## TLS bootstrap, side by side (bench/bootstrap)\n\n")
	fmt.Fprintf(&b, "Written by `go run ./bench/bootstrap` on %s. Each agent joins as node bench-bootstrap with the bootstrap\n", time.Now().UTC().Format("2006-01-02"))
	b.WriteString("token alone (`--bootstrap-kubeconfig`, `rotateCertificates: true`); the client CSR is auto-approved and signed by\n")
	b.WriteString("the controller manager. Seconds from the agent's start to its Node Ready:\n\n")
	b.WriteString("| agent | median | min | max | runs |\n|---|---|---|---|---|\n")
	for _, r := range results {
		v := append([]float64(nil), r.Seconds...)
		sort.Float64s(v)
		if len(v) == 0 {
			continue
		}
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %d |\n", r.Agent, med, v[0], v[len(v)-1], len(v))
	}
	return b.String()
}
