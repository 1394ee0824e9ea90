package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// kubeadm's preflight regexp for `kubelet --version` (cmd/kubeadm/app/preflight/utils.go).
var kubeadmKubeletVersion = regexp.MustCompile(`^\s*Kubernetes v((0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)([-\w.+]*)?)\s*$`)

// `make install` puts nodelet, its unit and kubeadm's drop-in in place; the
// unit passes systemd's own check; the installed binary answers --version as
// kubeadm parses it, `version -o json` and --help as upstream; and a node
// laid out by kubeadm (bootstrap-kubelet.conf, kubelet.conf still to be
// written, config.yaml, kubeadm-flags.env, /etc/default/kubelet) joins the
// cluster with the command line the unit and drop-in give, as systemd would
// expand it.
func TestInstall(t *testing.T) {
	c := framework.RequireCluster(t)
	root := t.TempDir()
	prefix, unitDir := filepath.Join(root, "usr/local"), filepath.Join(root, "etc/systemd/system")
	cmd := exec.Command("make", "-s", "install", "PREFIX="+prefix, "UNITDIR="+unitDir)
	cmd.Dir = c.RepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	bin := filepath.Join(prefix, "bin/nodelet")
	unit := filepath.Join(unitDir, "nodelet.service")
	dropIn := filepath.Join(unitDir, "nodelet.service.d/10-kubeadm.conf")
	for path, mode := range map[string]os.FileMode{bin: 0o755, unit: 0o644, dropIn: 0o644} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("make install did not write %s: %v", path, err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), mode)
		}
	}

	// systemd's own check of the unit and its drop-in (syntax, ExecStart executable).
	if out, err := exec.Command("systemd-analyze", "verify", "--man=no", unit).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
	}

	run := func(args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("nodelet %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("--version")
	if m := kubeadmKubeletVersion.FindAllStringSubmatch(strings.TrimSpace(out), -1); len(m) != 1 || m[0][1] != "1.37.2" {
		t.Errorf("--version printed %q: kubeadm would not parse it as kubelet v1.37.2", out)
	}
	if out := run("--version=raw"); !strings.HasPrefix(out, `version.Info{Major:"1", Minor:"37"`) {
		t.Errorf("--version=raw printed %q", out)
	}
	var info struct {
		KubeletVersion struct {
			GitVersion, GitCommit, GitTreeState, GoVersion, Platform string
		} `json:"kubeletVersion"`
		Agent struct{ Name, Version string } `json:"agent"`
	}
	js := run("version", "-o", "json")
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, js)
	}
	head, _ := exec.Command("git", "-C", c.RepoRoot, "rev-parse", "HEAD").Output()
	if info.KubeletVersion.GitVersion != "v1.37.2" || info.Agent.Name != "nodelet" || info.KubeletVersion.GoVersion == "" || info.KubeletVersion.Platform != "linux/amd64" {
		t.Errorf("version -o json: %s", js)
	}
	if h := strings.TrimSpace(string(head)); h != "" && info.KubeletVersion.GitCommit != h {
		t.Errorf("version -o json names commit %q, the repository is at %q", info.KubeletVersion.GitCommit, h)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, want := range []string{"Usage:\n  nodelet [flags]\n", "\nFlags:\n", "--bootstrap-kubeconfig string", "--config string", "--container-runtime-endpoint string", "--version version[=true]", "-v, --v Level"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if out, err := exec.Command(bin, "stray").CombinedOutput(); err == nil || !strings.Contains(string(out), "does not take any arguments") {
		t.Errorf("nodelet stray: %v %s", err, out)
	}

	// A kubeadm node's files, under root instead of /: kubeadm join leaves a
	// bootstrap kubeconfig, the KubeletConfiguration and kubeadm-flags.env;
	// the operator's KUBELET_EXTRA_ARGS are in /etc/default/kubelet.
	name := "e2e-install"
	n := framework.NewBootstrapNodelet(t, c, name) // for its config file and the node's cleanup
	host := func(p string) string { return filepath.Join(root, p) }
	for src, dst := range map[string]string{
		c.Env["BOOTSTRAP_KUBECONFIG"]:  host("etc/kubernetes/bootstrap-kubelet.conf"),
		filepath.Join(c.PKI, "ca.crt"): host("etc/kubernetes/ca.crt"), // the bootstrap kubeconfig names it relatively
		n.ConfigFile:                   host("var/lib/kubelet/config.yaml"),
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, dst, string(b))
	}
	writeTestFile(t, host("var/lib/kubelet/kubeadm-flags.env"),
		fmt.Sprintf("KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=%s --node-ip=%s\"\n", c.RuntimeEndpoint, c.NodeIP))
	writeTestFile(t, host("etc/default/kubelet"),
		fmt.Sprintf("KUBELET_EXTRA_ARGS=--hostname-override=%s --root-dir=%s --cert-dir=%s\n", name, host("var/lib/kubelet"), host("var/lib/kubelet/pki")))
	argv, err := systemdCommand([]string{unit, dropIn}, func(p string) string {
		// kubeadm's absolute paths, moved under root.
		for _, dir := range []string{"/etc/kubernetes/", "/var/lib/kubelet/", "/etc/default/"} {
			if strings.HasPrefix(p, dir) {
				return host(p)
			}
		}
		return p
	})
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != bin {
		t.Fatalf("ExecStart runs %s, want the installed %s", argv[0], bin)
	}
	t.Logf("ExecStart as systemd expands it: %s", strings.Join(argv, " "))
	logPath := filepath.Join(root, "nodelet.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	proc := exec.Command(argv[0], argv[1:]...)
	proc.Stdout, proc.Stderr = logFile, logFile
	proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = proc.Wait(); logFile.Close(); close(done) }()
	t.Cleanup(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = proc.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("nodelet log:\n%s", b)
		}
	})
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		select {
		case <-done:
			t.Fatal("nodelet exited")
		default:
		}
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready through the installed unit's command line", name)
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("nodeInfo.kubeletVersion %q", node.Status.NodeInfo.KubeletVersion)
	}
	if _, err := os.Stat(host("etc/kubernetes/kubelet.conf")); err != nil {
		t.Errorf("the bootstrap did not write kubeadm's kubelet.conf: %v", err)
	}
}

// systemdCommand is the ExecStart command line of a unit and its drop-ins,
// read in order as systemd does: Environment= assignments, EnvironmentFile=
// files (a leading "-": may be missing), the last ExecStart= (an empty one
// resets), and $VAR expanded into whitespace-separated words, ${VAR} into
// one. path maps the files the units name.
func systemdCommand(files []string, path func(string) string) ([]string, error) {
	env := map[string]string{}
	var exec string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || strings.HasPrefix(key, "#") {
				continue
			}
			switch key {
			case "Environment":
				for _, a := range shellWords(val) {
					if k, v, ok := strings.Cut(a, "="); ok {
						env[k] = v
					}
				}
			case "EnvironmentFile":
				optional := strings.HasPrefix(val, "-")
				b, err := os.ReadFile(path(strings.TrimPrefix(val, "-")))
				if err != nil {
					if optional && os.IsNotExist(err) {
						continue
					}
					return nil, err
				}
				sc := bufio.NewScanner(strings.NewReader(string(b)))
				for sc.Scan() {
					l := strings.TrimSpace(sc.Text())
					if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
						env[k] = strings.Trim(v, `"'`)
					}
				}
			case "ExecStart":
				exec = val
			}
		}
	}
	if exec == "" {
		return nil, fmt.Errorf("no ExecStart in %v", files)
	}
	var argv []string
	for _, w := range strings.Fields(exec) {
		switch {
		case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
			argv = append(argv, env[w[2:len(w)-1]])
		case strings.HasPrefix(w, "$"):
			argv = append(argv, strings.Fields(env[w[1:]])...)
		default:
			argv = append(argv, w)
		}
	}
	for i, a := range argv {
		// --flag=/etc/kubernetes/... and friends, moved with the files.
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			argv[i] = k + "=" + path(v)
		}
	}
	return argv, nil
}

// shellWords splits a systemd assignment list: words separated by spaces,
// a double-quoted word kept whole.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
