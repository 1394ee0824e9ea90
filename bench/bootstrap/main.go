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
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

// Result is one agent's runs: seconds from start to Node Ready.
type Result struct {
	Agent   string    `json:"agent"`
	Seconds []float64 `json:"secondsToReady"`
}

func main() {
	p := benchkit.New("bootstrap", "bench-bootstrap")
	p.Need = []string{"BOOTSTRAP_KUBECONFIG"}
	reps := flag.Int("reps", 5, "runs per agent")
	p.Run(func(b *benchkit.Bench) error {
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			secs, err := benchkit.Repeat(context.Background(), b, *reps, func(i int) (float64, error) { return measure(b, name, i) })
			return Result{Agent: name, Seconds: secs}, err
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results))
	})
}

// measure joins agent name once with the bootstrap token alone: seconds
// from its start to its Node Ready.
func measure(b *benchkit.Bench, name string, i int) (float64, error) {
	ctx := context.Background()
	client := b.Client
	spec := b.Spec(name)
	spec.Bootstrap, spec.ExtraConfig = true, "rotateCertificates: true\n"
	start := time.Now()
	a, err := nodeagent.Start(spec)
	if err != nil {
		return 0, err
	}
	err = nodeagent.WaitNodeReady(ctx, client, b.Node, a, 2*time.Minute)
	took := time.Since(start).Seconds()
	a.Stop()
	if err != nil {
		return 0, fmt.Errorf("%w (log %s)", err, a.LogPath())
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
		return 0, fmt.Errorf("node Ready without a bootstrap CSR (log %s)", a.LogPath())
	}
	log.Printf("%s run %d: start -> node Ready %.2f s (%d bootstrap CSR)", name, i, took, bootstrapCSRs)
	framework.UnmountUnder(a.Dir, log.Printf)
	_ = os.RemoveAll(a.Dir)
	deleteCSRs(ctx, client, b.Node)
	return took, nil
}

// deleteCSRs removes the node's and the bootstrap token's CSRs: the next
// run starts from nothing.
func deleteCSRs(ctx context.Context, client kubernetes.Interface, node string) {
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, c := range csrs.Items {
		if strings.HasSuffix(c.Spec.Username, ":"+node) || strings.HasPrefix(c.Spec.Username, "system:bootstrap:") {
			_ = client.CertificatesV1().CertificateSigningRequests().Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
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
