package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// cli runs `nodelet ARGS...` against n's local API; it returns stdout,
// stderr and the exit code.
func cli(t *testing.T, n *framework.Nodelet, args ...string) (string, string, int) {
	t.Helper()
	// The flag right after the command: after "--" it would be exec's.
	cmd := exec.Command(framework.NodeletBinary(t), append([]string{args[0], "--root-dir", n.RootDir}, args[1:]...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// lockedBuffer is a strings.Builder that a command's output goroutine can
// write while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// portForwardGet runs `nodelet port-forward POD LOCAL:8080` (pod: the
// command's arguments before the ports) and waits until a GET of the
// local port answers with want.
func portForwardGet(t *testing.T, n *framework.Nodelet, want string, pod ...string) {
	t.Helper()
	port := framework.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append(append([]string{"port-forward"}, pod...), framework.Itoa(port)+":8080", "--root-dir", n.RootDir)
	pf := exec.CommandContext(ctx, framework.NodeletBinary(t), args...)
	var out lockedBuffer
	pf.Stdout, pf.Stderr = &out, &out
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = pf.Wait() }()
	var body string
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + framework.Itoa(port) + "/")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, want)
	}, "port-forward %v serves the pod's page (got %q; its output %q)", pod, body, &out)
}

// podLine is the fields of pod's row in a `nodelet pods` table.
func podLine(table, pod string) []string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == pod {
			return f
		}
	}
	return nil
}

// TestCLIStandalone drives `nodelet pods`, `describe` (the not-Ready line,
// the back-off left, the volumes' states), `exec` (-i; -it in a pty: raw
// mode, the terminal's size), `attach`, `logs`, `port-forward`, `run`,
// `rm` and bash completion against a
// standalone nodelet through its local API (<root-dir>/nodelet.sock, mode
// 0600): the pod table with kubectl's columns and statuses (Running,
// CrashLoopBackOff, an image pull failure), -o wide (IP, SOURCE) and -o
// json; run -f of a pod that starts and of one that fails, rm; describe's not-Ready line for a crash loop, an image pull failure
// and a failing readiness probe; exec's output, exit code and stdin; logs with --tail, -f following new lines, a manifest's name
// without the node's suffix; a pod that does not exist and a nodelet that
// is not running are errors with exit code 1.
func TestCLIStandalone(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-cli")
	n.Start()
	n.WriteManifest("web.yaml", podManifest("web", "", container("app", "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.2; done")))
	n.WriteManifest("crasher.yaml", podManifest("crasher", "", container("app", "echo bye; exit 3")))
	n.WriteManifest("badimage.yaml", podManifest("badimage", "", `  - name: app
    image: 127.0.0.1:1/nothing/here:v1
`))
	n.WriteManifest("srv.yaml", podManifest("srv", "", container("app", "echo hello from srv > /tmp/index.html; httpd -f -p 8080 -h /tmp")))
	n.WriteManifest("unready.yaml", podManifest("unready", "", container("app", "sleep 3600")+`    readinessProbe:
      exec: {command: ["sh", "-c", "echo not yet; exit 1"]}
      periodSeconds: 1
`))
	// Its hostPath directory does not exist: the emptyDir before it is set
	// up, the hostPath fails, the emptyDir after it is not reached.
	n.WriteManifest("vols.yaml", podManifest("vols", `  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: missing, hostPath: {path: `+filepath.Join(n.RootDir, "no-such-dir")+`, type: Directory}}
  - {name: after, emptyDir: {}}
`, container("app", "sleep 3600")))
	// It reads one line from its own stdin (attach -i), answers and exits.
	n.WriteManifest("echoer.yaml", podManifest("echoer", "  restartPolicy: Never\n", container("app", "read l; echo got $l")+`    stdin: true
    stdinOnce: true
`))
	waitRunning(t, s, n.PodName("web"), "app", 90*time.Second)

	sock := filepath.Join(n.RootDir, "nodelet.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", sock, st, err)
	}
	var table string
	framework.Eventually(t, 90*time.Second, 500*time.Millisecond, func() bool {
		out, _, code := cli(t, n, "pods")
		table = out
		c, b := podLine(out, n.PodName("crasher")), podLine(out, n.PodName("badimage"))
		return code == 0 && c != nil && c[3] == "CrashLoopBackOff" && b != nil && (b[3] == "ErrImagePull" || b[3] == "ImagePullBackOff")
	}, "nodelet pods shows the crash loop and the pull failure")
	t.Logf("nodelet pods:\n%s", table)
	if !strings.HasPrefix(strings.Join(strings.Fields(table), " "), "NAMESPACE NAME READY STATUS RESTARTS AGE") {
		t.Errorf("header: %s", table)
	}
	if w := podLine(table, n.PodName("web")); w == nil || w[2] != "1/1" || w[3] != "Running" || w[4] != "0" {
		t.Errorf("web's row %v", w)
	}
	if c := podLine(table, n.PodName("crasher")); c == nil || c[2] != "0/1" || c[4] == "0" {
		t.Errorf("crasher's row %v (restarts expected)", c)
	}
	wide, _, _ := cli(t, n, "pods", "-o", "wide")
	if w := podLine(wide, n.PodName("web")); w == nil || len(w) != 8 || !strings.HasPrefix(w[6], "10.") || w[7] != "file" {
		t.Errorf("wide row %v\n%s", w, wide)
	}
	js, _, code := cli(t, n, "pods", "-o", "json")
	var list v1.PodList
	if err := json.Unmarshal([]byte(js), &list); err != nil || code != 0 || len(list.Items) != 7 {
		t.Errorf("pods -o json: %v, %d pods, exit %d", err, len(list.Items), code)
	}

	// describe: the not-Ready line says why.
	for _, tc := range []struct{ pod, want string }{
		{"crasher", "Not Ready: container app keeps crashing: restarted"},
		{"badimage", "Not Ready: container app is waiting: "},
		{"unready", "Not Ready: container app is running but not ready: Readiness probe failed:"},
	} {
		var out string
		framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
			o, _, code := cli(t, n, "describe", tc.pod)
			out = o
			return code == 0 && strings.Contains(strings.Join(strings.Fields(o), " "), tc.want)
		}, "describe %s says %q", tc.pod, tc.want)
		if !strings.Contains(out, "Events:") || !strings.Contains(out, "Containers:") {
			t.Errorf("describe %s:\n%s", tc.pod, out)
		}
		if tc.pod == "crasher" {
			t.Logf("nodelet describe crasher:\n%s", out)
		}
	}
	if out, _, _ := cli(t, n, "describe", "web"); strings.Contains(out, "Not Ready:") {
		t.Errorf("describe of a ready pod has a Not Ready line:\n%s", out)
	}
	// describe: the back-off still to wait, in the container's state and
	// the Not Ready line.
	var crash string
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		crash, _, _ = cli(t, n, "describe", "crasher")
		return strings.Contains(crash, "Back-off:") && strings.Contains(crash, "more to wait (restarts at ") && strings.Contains(crash, "; restarts in ")
	}, "describe crasher shows the back-off left")
	t.Logf("nodelet describe crasher (in back-off):\n%s", crash)
	// describe: each volume's state.
	var vols string
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		vols, _, _ = cli(t, n, "describe", "vols")
		f := strings.Join(strings.Fields(vols), " ")
		return strings.Contains(f, "scratch: Type: EmptyDir State: Ready (set up ") &&
			strings.Contains(f, "missing: Type: HostPath "+filepath.Join(n.RootDir, "no-such-dir")+" State: Failed ") &&
			strings.Contains(f, "hostPath type check failed") && strings.Contains(f, "after: Type: EmptyDir State: Pending") &&
			strings.Contains(f, "Not Ready: volume missing (hostPath) cannot be set up: hostPath type check failed")
	}, "describe vols shows each volume's state")
	if !strings.Contains(vols, "Path:") || !strings.Contains(vols, "/volumes/kubernetes.io~empty-dir/scratch") {
		t.Errorf("describe vols lacks the emptyDir's path:\n%s", vols)
	}
	t.Logf("nodelet describe vols:\n%s", vols)

	// exec: output, exit code, stdin.
	if out, _, code := cli(t, n, "exec", "web", "--", "sh", "-c", "echo hi; exit 7"); code != 7 || out != "hi\n" {
		t.Errorf("exec: %q exit %d, want hi and 7", out, code)
	}
	ex := exec.Command(framework.NodeletBinary(t), "exec", "-i", "web", "--root-dir", n.RootDir, "--", "sh", "-c", "tr a-z A-Z")
	ex.Stdin = strings.NewReader("from stdin\n")
	if out, err := ex.Output(); err != nil || string(out) != "FROM STDIN\n" {
		t.Errorf("exec -i: %q %v", out, err)
	}

	// exec -it: the local terminal (a pty here, from script(1)) is put in
	// raw mode, so ^C goes to the remote shell as a byte and its terminal
	// makes it SIGINT (a terminal left cooked would kill nodelet exec
	// itself instead), and the remote terminal gets the local one's size
	// and follows its change.
	var ttyOut []byte
	framework.Eventually(t, 30*time.Second, time.Second, func() bool {
		// The remote terminal gets the size once the command runs (as
		// kubectl's, the first resize races the command's start), and
		// again when the local one changes (SIGWINCH) 3 s in.
		remote := `size() { for i in $(seq 50); do s=$(stty size 2>/dev/null); [ "$s" = "$1" ] && break; sleep 0.1; done; echo "size $s"; }; ` +
			`size "37 101"; size "21 81"; trap "echo got-sigint; exit 5" INT; echo ready; sleep 30 & wait`
		inner := "stty rows 37 cols 101; (sleep 3; stty rows 21 cols 81 </dev/tty) & exec " + framework.NodeletBinary(t) + " exec -it web --root-dir " + n.RootDir +
			" -- sh -c '" + remote + "'"
		sc := exec.Command("script", "-qfec", inner, "/dev/null")
		stdin, err := sc.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var buf lockedBuffer
		sc.Stdout, sc.Stderr = &buf, &buf
		if err := sc.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 150 && !strings.Contains(buf.String(), "ready"); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = stdin.Write([]byte{3})
		done := make(chan error, 1)
		go func() { done <- sc.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = sc.Process.Kill()
			<-done
		}
		_ = stdin.Close()
		ttyOut = []byte(buf.String())
		ok := strings.Contains(buf.String(), "size 37 101") && strings.Contains(buf.String(), "size 21 81") &&
			strings.Contains(buf.String(), "got-sigint") && sc.ProcessState.ExitCode() == 5
		if !ok {
			t.Logf("exec -it in script(1): exit %d, %q", sc.ProcessState.ExitCode(), ttyOut)
		}
		return ok
	}, "exec -it in a pty: size 37x101 then 21x81, ^C to the remote shell, exit code 5")
	t.Logf("nodelet exec -it in script(1): %q", ttyOut)

	// attach -i: the container's own stdin and stdout.
	waitRunning(t, s, n.PodName("echoer"), "app", 60*time.Second)
	at := exec.Command(framework.NodeletBinary(t), "attach", "-i", "echoer", "--root-dir", n.RootDir)
	at.Stdin = strings.NewReader("hello\n")
	if out, err := at.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "got hello" {
		t.Errorf("attach -i: %q %v", out, err)
	}

	// logs: the manifest's name is enough.
	out, errOut, code := cli(t, n, "logs", "web", "--tail", "1")
	if code != 0 || !strings.HasPrefix(out, "line ") || strings.Count(out, "\n") != 1 {
		t.Errorf("logs --tail 1: %q %q exit %d", out, errOut, code)
	}
	if out, _, code := cli(t, n, "logs", n.PodName("crasher"), "-p"); code != 0 || strings.TrimSpace(out) != "bye" {
		t.Errorf("logs -p of the crasher: %q exit %d", out, code)
	}
	// -f follows: new lines keep coming.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f := exec.CommandContext(ctx, framework.NodeletBinary(t), "logs", "-f", "--tail", "0", "web", "--root-dir", n.RootDir)
	stdout, err := f.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	got := 0
	for got < 5 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "line ") {
			got++
		}
	}
	cancel()
	_ = f.Wait()
	if got < 5 {
		t.Errorf("logs -f gave %d new lines", got)
	}

	// port-forward: a local port to the pod's 8080.
	waitRunning(t, s, n.PodName("srv"), "app", 60*time.Second)
	portForwardGet(t, n, "hello from srv", "srv")

	// bash completion: pod names from the running nodelet.
	comp := exec.Command("bash", "-c", `source <(nodelet completion bash); COMP_WORDS=(nodelet logs un); COMP_CWORD=2; _nodelet; echo "${COMPREPLY[@]}"`)
	comp.Env = append(os.Environ(), "PATH="+filepath.Dir(framework.NodeletBinary(t))+":"+os.Getenv("PATH"), "NODELET_SOCKET="+sock)
	if out, err := comp.Output(); err != nil || strings.TrimSpace(string(out)) != n.PodName("unready") {
		t.Errorf("completion of 'nodelet logs un': %q %v", out, err)
	}

	// run -f: a pod that starts (exit 0, its events printed) and one that
	// cannot (exit 1); rm removes the manifest and the pod.
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(podManifest("good", "", container("app", "sleep 3600"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(podManifest("bad", "", `  - name: app
    image: 127.0.0.1:1/nothing/here:v2
`)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, n, "run", "-f", good)
	if code != 0 || !strings.Contains(out, "Started") || !strings.Contains(out, "running and ready") {
		t.Errorf("run -f good: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("nodelet run -f good.yaml:\n%s", out)
	out, errOut, code = cli(t, n, "run", "-f", bad, "--timeout", "60s")
	if code != 1 || !strings.Contains(out, "container app: ErrImagePull") {
		t.Errorf("run -f bad: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli(t, n, "run", "-f", good); code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("run -f of a manifest already there: exit %d %s", code, errOut)
	}
	for _, p := range []string{"good", "bad"} {
		if out, errOut, code := cli(t, n, "rm", p); code != 0 || !strings.Contains(out, "gone") {
			t.Errorf("rm %s: exit %d %s%s", p, code, out, errOut)
		}
	}
	if out, _, _ := cli(t, n, "pods"); podLine(out, n.PodName("good")) != nil {
		t.Errorf("good still listed after rm:\n%s", out)
	}

	if _, errOut, code := cli(t, n, "logs", "nope"); code != 1 || !strings.Contains(errOut, `pod "nope" not found`) {
		t.Errorf("logs of a pod that does not exist: %q exit %d", errOut, code)
	}
	n.Stop()
	if _, errOut, code := cli(t, n, "pods"); code != 1 || !strings.Contains(errOut, "nodelet is not running") {
		t.Errorf("pods with nodelet stopped: %q exit %d", errOut, code)
	}
}

// TestCLICluster: the same commands on a node of the control plane: pods
// from the API server are listed with SOURCE api next to a static pod,
// describe shows the events nodelet recorded and the not-Ready line of an
// image pull failure, logs (-f), exec, attach and port-forward work on an API pod, rm
// refuses a pod that belongs to the API server, and run -f starts a static
// pod that is mirrored into the API (rm removes both). (SOURCE checkpoint:
// TestOfflineRestart.)
func TestCLICluster(t *testing.T) {
	const node = "e2e-cli-cluster"
	c, n := clusterNode(t, node, "")
	ns := c.Namespace(t, "cli")
	createPods(t, c, ns, busyboxPod("talker", node, "echo hello from the API; sleep 3600"))
	bad := busyboxPod("puller", node, "true")
	bad.Spec.Containers[0].Image = "127.0.0.1:1/nothing/here:v3"
	createPods(t, c, ns, bad)
	n.WriteManifest("static.yaml", podManifest("static", "", container("app", "sleep 3600")))
	waitPod(t, c, ns, "talker", 60*time.Second, "Running", podReady)

	var table string
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		out, _, _ := cli(t, n, "pods", "-o", "wide")
		table = out
		tl, st := podLine(out, "talker"), podLine(out, n.PodName("static"))
		return tl != nil && tl[3] == "Running" && tl[7] == "api" && st != nil && st[7] == "file"
	}, "nodelet pods lists the API pod and the static pod")
	t.Logf("nodelet pods -o wide:\n%s", table)
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		out, _, _ := cli(t, n, "describe", "-n", ns, "puller")
		return strings.Contains(out, "Not Ready:") && strings.Contains(out, "container c is waiting: ") &&
			(strings.Contains(out, "ErrImagePull") || strings.Contains(out, "ImagePullBackOff")) && strings.Contains(out, "Failed")
	}, "describe of the pull failure")
	if out, _, code := cli(t, n, "logs", "-n", ns, "talker"); code != 0 || strings.TrimSpace(out) != "hello from the API" {
		t.Errorf("logs: %q exit %d", out, code)
	}
	if out, _, code := cli(t, n, "exec", "-n", ns, "talker", "--", "hostname"); code != 0 || strings.TrimSpace(out) != "talker" {
		t.Errorf("exec hostname: %q exit %d", out, code)
	}
	if _, errOut, code := cli(t, n, "rm", "-n", ns, "talker"); code != 1 || !strings.Contains(errOut, "kubectl delete pod") {
		t.Errorf("rm of an API pod: %q exit %d", errOut, code)
	}

	// attach -i and logs -f on an API pod: it answers each line of its
	// stdin; the answers are in its log too.
	echo := busyboxPod("echo", node, "while read l; do echo got $l; done")
	echo.Spec.Containers[0].Stdin, echo.Spec.Containers[0].StdinOnce = true, true
	createPods(t, c, ns, echo)
	waitPod(t, c, ns, "echo", 60*time.Second, "Running", podReady)
	lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer lcancel()
	follow := exec.CommandContext(lctx, framework.NodeletBinary(t), "logs", "-f", "-n", ns, "echo", "--root-dir", n.RootDir)
	var followed lockedBuffer
	follow.Stdout = &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	at := exec.Command(framework.NodeletBinary(t), "attach", "-i", "-n", ns, "echo", "--root-dir", n.RootDir)
	at.Stdin = strings.NewReader("one\ntwo\n")
	if out, err := at.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "got one\ngot two" {
		t.Errorf("attach -i to an API pod: %q %v", out, err)
	}
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(followed.String(), "got one\ngot two\n")
	}, "logs -f follows the attached answers (got %q)", &followed)
	lcancel()
	_ = follow.Wait()

	// port-forward to an API pod.
	createPods(t, c, ns, busyboxPod("server", node, "echo hello from the API pod > /tmp/index.html; httpd -f -p 8080 -h /tmp"))
	waitPod(t, c, ns, "server", 60*time.Second, "Running", podReady)
	portForwardGet(t, n, "hello from the API pod", "-n", ns, "server")

	// run -f: a static pod, mirrored into the API; rm removes both.
	manifest := filepath.Join(t.TempDir(), "runner.yaml")
	if err := os.WriteFile(manifest, []byte(podManifest("runner", "", container("app", "sleep 3600"))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, n, "run", "-f", manifest)
	if code != 0 || !strings.Contains(out, "running and ready") {
		t.Errorf("run -f in cluster mode: exit %d\n%s%s", code, out, errOut)
	}
	mirror := n.PodName("runner")
	waitPod(t, c, "default", mirror, 30*time.Second, "the mirror pod Running", podReady)
	if out, errOut, code := cli(t, n, "rm", "runner"); code != 0 || !strings.Contains(out, "gone") {
		t.Errorf("rm runner: exit %d %s%s", code, out, errOut)
	}
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods("default").Get(context.Background(), mirror, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the mirror pod gone after rm")
}
