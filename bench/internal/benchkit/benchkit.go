// Package benchkit is the skeleton the side-by-side benchmarks in bench/
// share: the flags every one has (-agents, -out, -section, -doc, -node),
// the stack prepared once and the node cleaned between runs, the loop over
// the agents, and the output: the raw results as JSON in -out, the
// Markdown section in -section, and that section put into the page -doc
// between the program's markers. A program keeps its scenario, its figures
// and its table.
package benchkit

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"

	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

// Program is one benchmark, bench/<Name>. Its results go to
// bench/results/<Name>.json and .md unless -out and -section say
// otherwise, and its section into a page between the markers
// <!-- <Name>: begin (bench/<Name>) --> and <!-- <Name>: end --> (the ones
// hack/bench.sh writes around bench/results/<Name>.md).
type Program struct {
	Name string
	// Agents is -agents: the agents to run, in order.
	Agents []string
	// Out, Section, Doc and Node are -out, -section, -doc and -node.
	Out, Section, Doc, Node string
	// Namespaces prefixes the namespaces the benchmark creates: Clean
	// removes them, their pods and their sandboxes ("": none).
	Namespaces string
	// Need are the .stack/env variables the benchmark needs besides the
	// ones every benchmark does.
	Need []string

	agents string
}

// New registers the common flags on the command line, with the program's
// defaults (node: the name its agents run as). The program adds its own
// flags, then calls Run, or Parse and what it uses of the rest.
func New(name, node string) *Program {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	p := &Program{Name: name}
	flag.StringVar(&p.agents, "agents", "upstream,nodelet", "agents to run, in order")
	flag.StringVar(&p.Out, "out", "bench/results/"+name+".json", "raw results (JSON)")
	flag.StringVar(&p.Section, "section", "bench/results/"+name+".md", "Markdown section written from the results")
	flag.StringVar(&p.Doc, "doc", "", "also put the section into this Markdown page (replacing a previous one)")
	flag.StringVar(&p.Node, "node", node, "node name")
	return p
}

// Parse parses the command line.
func (p *Program) Parse() {
	flag.Parse()
	p.Agents = strings.Split(p.agents, ",")
}

// Run parses the command line, prepares the stack and runs main on it. The
// host is restored after main, also when it fails; an error ends the
// program.
func (p *Program) Run(main func(b *Bench) error) {
	p.Parse()
	b, err := p.Prepare()
	if err != nil {
		log.Fatal(err)
	}
	err = main(b)
	b.Close()
	if err != nil {
		log.Fatal(err)
	}
}

// Bench is what a benchmark's runs start from: the stack's .stack/env, an
// admin client, containerd's CRI runtime, the host's state to restore,
// nodelet built from the working tree, and the cleaner of the program's
// node and namespaces.
type Bench struct {
	*Program
	Env     map[string]string
	Client  kubernetes.Interface
	Runtime internalapi.RuntimeService
	Host    *nodeagent.Host
	// Nodelet is the built nodelet binary.
	Nodelet string
	Cleaner nodeagent.Cleaner
}

// benchEnv are the .stack/env variables every benchmark needs.
var benchEnv = []string{"CONTAINER_RUNTIME_ENDPOINT", "NODE_IP", "KUBECONFIG", "K8S_BIN", "CLUSTER_PKI", "BUSYBOX_IMAGE"}

// Prepare checks that it runs as root with the stack and the control plane
// up (and the program's Need), connects, snapshots the host and builds
// nodelet. Close restores the host.
func (p *Program) Prepare() (*Bench, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s needs root (it runs node agents)", p.Name)
	}
	env, err := framework.ReadEnvFile(filepath.Join(".stack", "env"))
	if err != nil {
		return nil, fmt.Errorf("the stack is not up (run hack/stack-up.sh and hack/cluster/up.sh): %w", err)
	}
	for _, k := range append(append([]string{}, benchEnv...), p.Need...) {
		if env[k] == "" {
			return nil, fmt.Errorf(".stack/env lacks %s (run hack/cluster/up.sh)", k)
		}
	}
	if _, err := os.Stat(filepath.Join(env["K8S_BIN"], "kubelet")); err != nil {
		return nil, fmt.Errorf("upstream kubelet: %w (hack/cluster/build.sh builds it)", err)
	}
	client, rt, err := nodeagent.Connect(env, 100, 200)
	if err != nil {
		return nil, err
	}
	host, err := nodeagent.SnapshotHost()
	if err != nil {
		return nil, err
	}
	bin, err := os.MkdirTemp("", p.Name+"-bin-")
	if err != nil {
		host.Restore()
		return nil, err
	}
	b := &Bench{Program: p, Env: env, Client: client, Runtime: rt, Host: host, Nodelet: filepath.Join(bin, "nodelet"),
		Cleaner: nodeagent.Cleaner{Client: client, Runtime: rt, Node: p.Node, Mine: func(ns string) bool {
			return p.Namespaces != "" && strings.HasPrefix(ns, p.Namespaces)
		}}}
	log.Print("building nodelet")
	if _, err := nodeagent.Run("go", "build", "-o", b.Nodelet, "./cmd/nodelet"); err != nil {
		host.Restore()
		return nil, err
	}
	return b, nil
}

// Binary is the agent's binary: the upstream kubelet for
// nodeagent.Upstream, the built nodelet otherwise.
func (b *Bench) Binary(agent string) string {
	if agent == nodeagent.Upstream {
		return filepath.Join(b.Env["K8S_BIN"], "kubelet")
	}
	return b.Nodelet
}

// Spec is how the benchmark runs agent as its node, before what the
// scenario adds (configuration, environment, folders).
func (b *Bench) Spec(agent string) nodeagent.Spec {
	return nodeagent.Spec{Name: agent, Binary: b.Binary(agent), Node: b.Node, Env: b.Env, MaxPods: 20}
}

// Clean removes what a run left (nodeagent.Cleaner.CleanNode: the
// program's namespaces and their sandboxes, the Node, mounts under dir if
// given, the kubepods cgroups) and puts back the sysctls the upstream
// kubelet rewrites. A failure is logged: the next run goes on.
func (b *Bench) Clean(ctx context.Context, dir string) {
	if err := b.Cleaner.CleanNode(ctx, dir); err != nil {
		log.Printf("cleanup: %v", err)
	}
	b.Host.RestoreSysctls()
}

// Close restores the host.
func (b *Bench) Close() {
	b.Host.Restore()
}

// Each runs run for every agent of -agents, in turn, and returns the
// results in that order; the first error ends it. The run cleans up after
// itself (Clean, or Repeat).
func Each[R any](b *Bench, run func(agent string) (R, error)) ([]R, error) {
	var results []R
	for _, agent := range b.Agents {
		r, err := run(agent)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", agent, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// Repeat runs run n times and cleans the node after each run (each starts
// an agent afresh); it returns the runs' results, and the first error ends
// it.
func Repeat[R any](ctx context.Context, b *Bench, n int, run func(i int) (R, error)) ([]R, error) {
	var runs []R
	for i := 0; i < n; i++ {
		r, err := run(i)
		b.Clean(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}
