package agent

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// Bench is what a side-by-side benchmark of the agents starts from: the
// stack's .stack/env, an admin client, containerd's CRI runtime, the host's
// state to restore, and nodelet built from the working tree.
type Bench struct {
	Env     map[string]string
	Client  kubernetes.Interface
	Runtime internalapi.RuntimeService
	Host    *Host
	// Nodelet is the built nodelet binary.
	Nodelet string
}

// benchEnv are the .stack/env variables every benchmark needs.
var benchEnv = []string{"CONTAINER_RUNTIME_ENDPOINT", "NODE_IP", "KUBECONFIG", "K8S_BIN", "CLUSTER_PKI", "BUSYBOX_IMAGE"}

// PrepareBench checks that it runs as root with the stack and the control
// plane up (and the env variables need besides the usual ones), connects,
// snapshots the host and builds nodelet. Close restores the host.
func PrepareBench(name string, need ...string) (*Bench, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s needs root (it runs node agents)", name)
	}
	env, err := framework.ReadEnvFile(filepath.Join(".stack", "env"))
	if err != nil {
		return nil, fmt.Errorf("the stack is not up (run hack/stack-up.sh and hack/cluster/up.sh): %w", err)
	}
	for _, k := range append(append([]string{}, benchEnv...), need...) {
		if env[k] == "" {
			return nil, fmt.Errorf(".stack/env lacks %s (run hack/cluster/up.sh)", k)
		}
	}
	if _, err := os.Stat(filepath.Join(env["K8S_BIN"], "kubelet")); err != nil {
		return nil, fmt.Errorf("upstream kubelet: %w (hack/cluster/build.sh builds it)", err)
	}
	client, rt, err := Connect(env, 100, 200)
	if err != nil {
		return nil, err
	}
	host, err := SnapshotHost()
	if err != nil {
		return nil, err
	}
	bin, err := os.MkdirTemp("", name+"-bin-")
	if err != nil {
		host.Restore()
		return nil, err
	}
	b := &Bench{Env: env, Client: client, Runtime: rt, Host: host, Nodelet: filepath.Join(bin, "nodelet")}
	log.Print("building nodelet")
	if _, err := Run("go", "build", "-o", b.Nodelet, "./cmd/nodelet"); err != nil {
		host.Restore()
		return nil, err
	}
	return b, nil
}

// Binary is the agent's binary: the upstream kubelet for Upstream, the
// built nodelet otherwise.
func (b *Bench) Binary(agent string) string {
	if agent == Upstream {
		return filepath.Join(b.Env["K8S_BIN"], "kubelet")
	}
	return b.Nodelet
}

// Close restores the host.
func (b *Bench) Close() {
	b.Host.Restore()
}

// WriteResults writes a benchmark's raw results as JSON to out, its
// Markdown section to section, and puts the section into the page doc
// between begin and end when doc is set.
func WriteResults(results any, out, section, doc, begin, end, text string) error {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(section, []byte(text), 0o644); err != nil {
		return err
	}
	if doc != "" {
		if err := SpliceSection(doc, begin, end, text); err != nil {
			return err
		}
	}
	log.Printf("wrote %s and %s", out, section)
	return nil
}

// Poll calls cond every interval until it is true (true) or timeout has
// passed (false).
func Poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(interval)
	}
	return false
}
