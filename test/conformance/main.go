// Command conformance runs upstream's NodeConformance e2e suite (e2e.test
// built from k8s.io/kubernetes, through ginkgo) against the upstream kubelet
// and nodelet, one after the other, each joined to the stack's control plane
// as the same node with the same KubeletConfiguration (test/agent), and
// writes docs/conformance.md with both agents' results side by side.
//
// It is run by `make conformance` (hack/conformance.sh), which builds the
// binaries and the images first; CONFORMANCE_FOCUS / CONFORMANCE_SKIP
// narrow the selection.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	remote "k8s.io/cri-client/pkg"

	"github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

type options struct {
	agents     string
	focus      string
	skip       string
	procs      int
	node       string
	out        string
	docs       string
	nodelet    string
	reportOnly bool
	rerun      bool
	timeout    time.Duration
}

func main() {
	o := &options{}
	flag.StringVar(&o.agents, "agents", "upstream,nodelet", "agents to run, in order")
	flag.StringVar(&o.focus, "focus", `\[NodeConformance\]`, "ginkgo --focus")
	flag.StringVar(&o.skip, "skip", `\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:`, "ginkgo --skip")
	flag.IntVar(&o.procs, "procs", 4, "ginkgo --procs (parallel test processes)")
	flag.StringVar(&o.node, "node", "conformance-node", "node name")
	flag.StringVar(&o.out, "out", ".cache/conformance", "folder for the raw ginkgo reports and the agents' logs")
	flag.StringVar(&o.docs, "docs", "docs", "folder for conformance.md and the summaries")
	flag.StringVar(&o.nodelet, "nodelet", "bin/nodelet", "nodelet binary")
	flag.BoolVar(&o.reportOnly, "report-only", false, "only write the report from the reports in --out")
	flag.BoolVar(&o.rerun, "rerun", false, "rerun the selected tests for the agents, keeping their full runs: the report takes the rerun's outcome for those tests")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "ginkgo --timeout per agent")
	flag.Parse()
	log.SetFlags(log.Ltime)
	if err := run(o); err != nil {
		log.Fatalf("conformance: %v", err)
	}
}

func run(o *options) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	env, err := framework.ReadEnvFile(filepath.Join(root, ".stack", "env"))
	if err != nil {
		return fmt.Errorf("%w (run make stack-up cluster-up first)", err)
	}
	agents := strings.Split(o.agents, ",")
	if !o.reportOnly {
		for _, name := range agents {
			if err := runAgent(o, env, name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	// The report has both agents when both have run, this time or before
	// (CONFORMANCE_AGENTS=nodelet reruns one side only): an agent whose raw
	// reports are not here (a clean clone, a cleared cache) keeps the run
	// published in docs/conformance/<agent>.json.
	var runs []*AgentRun
	for _, name := range []string{agent.Upstream, "nodelet"} {
		dir := filepath.Join(o.out, name)
		if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
			r, err := loadPublished(filepath.Join(o.docs, "conformance", name+".json"))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if r != nil {
				runs = append(runs, r)
			}
			continue
		}
		r, err := loadRun(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no report in %s", o.out)
	}
	return writeReportFile(o, runs)
}

// runAgent runs the suite against one agent on a clean node.
func runAgent(o *options, env map[string]string, name string) error {
	ctx := context.Background()
	rc, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(env["CONTAINER_RUNTIME_ENDPOINT"]).
		WithConnectionTimeout(10 * time.Second).WithTracerProvider(nil).Build(ctx)
	if err != nil {
		return err
	}
	host, err := agent.SnapshotHost()
	if err != nil {
		return err
	}
	// The suite's namespaces have random names: everything but the
	// cluster's own is the suite's.
	cleaner := agent.Cleaner{Client: client, Runtime: rt, Node: o.node, Mine: func(ns string) bool {
		return ns != "default" && !strings.HasPrefix(ns, "kube-")
	}}
	if err := cleaner.CleanNode(ctx, ""); err != nil {
		return err
	}
	bin := o.nodelet
	if name == agent.Upstream {
		bin = filepath.Join(env["K8S_BIN"], "kubelet")
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	cp, err := credentialProvider(o, env)
	if err != nil {
		return fmt.Errorf("the image credential provider: %w", err)
	}
	p, err := agent.Start(agent.Spec{Name: name, Binary: bin, Node: o.node, Env: env, MaxPods: 110, ExtraArgs: cp.args})
	if err != nil {
		return err
	}
	defer func() {
		p.Stop()
		if err := cleaner.CleanNode(context.Background(), p.Dir); err != nil {
			log.Printf("cleanup: %v", err)
		}
		host.Restore()
	}()
	if err := agent.WaitNodeReady(ctx, client, o.node, p, 2*time.Minute); err != nil {
		return err
	}
	out, err := filepath.Abs(filepath.Join(o.out, name))
	if err != nil {
		return err
	}
	if o.rerun {
		// A rerun of some tests goes beside the agent's full run; the
		// report applies reruns on top of it, newest last.
		out = filepath.Join(out, "rerun-"+time.Now().UTC().Format("20060102T150405"))
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	args := []string{
		"--procs", fmt.Sprint(o.procs), "--focus", o.focus, "--skip", o.skip, "--timeout", o.timeout.String(),
		"--output-dir", out, "--json-report", "report.json", "--junit-report", "junit.xml", "--no-color",
		filepath.Join(env["K8S_BIN"], "e2e.test"), "--",
		"-kubeconfig", env["KUBECONFIG"], "-provider", "skeleton", "-disable-log-dump",
		"-kubelet-root-dir", filepath.Join(p.Dir, "root"), "-node-os-distro", "debian",
		"-container-runtime-endpoint", env["CONTAINER_RUNTIME_ENDPOINT"],
	}
	log.Printf("%s: running ginkgo %s", name, strings.Join(args, " "))
	logf, err := os.Create(filepath.Join(out, "ginkgo.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(env["K8S_BIN"], "ginkgo"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+cp.repoList)
	start := time.Now()
	runErr := cmd.Run() // failing tests make ginkgo exit non-zero
	wall := time.Since(start)
	log.Printf("%s: suite took %s (%v)", name, wall.Round(time.Second), runErr)
	if err := os.WriteFile(filepath.Join(out, "focus"), []byte(o.focus+"\n"), 0o644); err != nil {
		return err
	}
	if v, err := rt.Version(ctx, "v1"); err == nil {
		if err := os.WriteFile(filepath.Join(out, "runtime"), []byte(v.RuntimeName+" "+v.RuntimeVersion+"\n"), 0o644); err != nil {
			return err
		}
	}
	if commit, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		if err := os.WriteFile(filepath.Join(out, "commit"), commit, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(out, "wall-seconds"), []byte(fmt.Sprintf("%.0f\n", wall.Seconds())), 0o644); err != nil {
		return err
	}
	version, _ := exec.Command(bin, "--version").CombinedOutput()
	if err := os.WriteFile(filepath.Join(out, "version"), version, 0o644); err != nil {
		return err
	}
	// The agent's log, for the failures.
	if data, err := os.ReadFile(p.LogPath()); err == nil {
		_ = os.WriteFile(filepath.Join(out, name+".log"), data, 0o644)
	}
	if _, err := os.Stat(filepath.Join(out, "report.json")); err != nil {
		return fmt.Errorf("ginkgo wrote no report (%v); see %s", runErr, logf.Name())
	}
	return nil
}

// provider is what the agents and the suite get for the image credential
// provider test ([Feature:KubeletCredentialProviders]).
type provider struct {
	args     []string // the agent's --image-credential-provider-* flags
	repoList string   // KUBE_TEST_REPO_LIST: the suite's private registry
}

// credentialProvider sets up, for both agents alike, a credential provider
// plugin (test/fakes/credprovider) giving the stack's private registry's
// credentials, and a repo list naming that registry as the suite's private
// one (its agnhost:2.6 is pushed there by hack/conformance.sh), so that
// upstream's test pulls a private image through the plugin.
func credentialProvider(o *options, env map[string]string) (provider, error) {
	reg, user, password := env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], env["PRIVATE_REGISTRY_PASSWORD"]
	if reg == "" || user == "" || password == "" {
		return provider{}, fmt.Errorf(".stack/env lacks the private registry (PRIVATE_REGISTRY, PRIVATE_REGISTRY_USER, PRIVATE_REGISTRY_PASSWORD): make stack-up")
	}
	dir, err := filepath.Abs(filepath.Join(o.out, "credprovider"))
	if err != nil {
		return provider{}, err
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return provider{}, err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "e2e-credprovider"), "./credprovider")
	build.Dir = "test/fakes"
	if out, err := build.CombinedOutput(); err != nil {
		return provider{}, fmt.Errorf("building test/fakes/credprovider: %v\n%s", err, out)
	}
	files := map[string]string{
		"password": password + "\n",
		"config.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: e2e-credprovider
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["%[1]s"]
  defaultCacheDuration: 1m
  args: ["--registry=%[1]s", "--username=%[2]s", "--password-file=%[3]s"]
`, reg, user, filepath.Join(dir, "password")),
		"repo-list.yaml": fmt.Sprintf("privateRegistry: %s/k8s-authenticated-test\n", reg),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return provider{}, err
		}
	}
	return provider{
		args:     []string{"--image-credential-provider-config", filepath.Join(dir, "config.yaml"), "--image-credential-provider-bin-dir", bin},
		repoList: filepath.Join(dir, "repo-list.yaml"),
	}, nil
}
