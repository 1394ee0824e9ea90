package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestContainerStopSignals: with the ContainerStopSignals gate on, a
// container's lifecycle.stopSignal is the signal it is stopped with, and
// its status reports the runtime's stop signal (its own, or its image's);
// with the gate off (upstream's default) such a container is refused with
// a message naming the gate rather than stopped with SIGTERM.
func TestContainerStopSignals(t *testing.T) {
	s := framework.RequireStack(t)
	if s.Env["STACK_RUNTIME"] != "containerd2" {
		if framework.InCI() {
			t.Fatalf("the stack's runtime is %q; stop signals need containerd 2 (STACK_RUNTIME=containerd2, the default)", s.Env["STACK_RUNTIME"])
		}
		t.Skipf("the stack's runtime is %q; stop signals need containerd 2", s.Env["STACK_RUNTIME"])
	}
	out := t.TempDir()
	manifest := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 20
  volumes:
  - name: out
    hostPath: {path: %[2]s}
  containers:
  - name: c
    image: %[3]s
    command: ["sh", "-c", "trap 'echo USR1 > /out/%[1]s; exit 0' USR1; trap 'echo TERM > /out/%[1]s; exit 0' TERM; while true; do sleep 0.1; done"]
    volumeMounts: [{name: out, mountPath: /out}]
    lifecycle:
      stopSignal: SIGUSR1
  - name: plain
    image: %[3]s
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
`, name, out, framework.Busybox)
	}
	pods := func(port int) []v1.Pod {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", port))
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var list v1.PodList
		if json.NewDecoder(resp.Body).Decode(&list) != nil {
			return nil
		}
		return list.Items
	}

	t.Run("gate on", func(t *testing.T) {
		n := framework.NewNodelet(t, s, "e2e-stopsignal")
		port := framework.FreePort(t)
		n.AppendConfig(fmt.Sprintf("readOnlyPort: %d\nfeatureGates:\n  ContainerStopSignals: true\n", port))
		n.Start()
		n.WriteManifest("usr1.yaml", manifest("usr1"))
		pod := n.PodName("usr1")
		waitRunning(t, s, pod, "c", 60*time.Second)
		waitRunning(t, s, pod, "plain", 60*time.Second)
		var statuses []v1.ContainerStatus
		framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
			for _, p := range pods(port) {
				if p.Name == pod && len(p.Status.ContainerStatuses) == 2 && p.Status.ContainerStatuses[0].StopSignal != nil {
					statuses = p.Status.ContainerStatuses
					return true
				}
			}
			return false
		}, "the pod's status with its stop signals")
		for _, cs := range statuses {
			want := map[string]v1.Signal{"c": v1.SIGUSR1, "plain": v1.SIGTERM}[cs.Name]
			if cs.StopSignal == nil || *cs.StopSignal != want {
				t.Errorf("container %s: status stopSignal %v, want %s", cs.Name, cs.StopSignal, want)
			}
		}
		time.Sleep(500 * time.Millisecond) // the traps are set
		n.RemoveManifest("usr1.yaml")
		var got []byte
		framework.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
			got, _ = os.ReadFile(filepath.Join(out, "usr1"))
			return len(got) > 0
		}, "the container stopped")
		if strings.TrimSpace(string(got)) != "USR1" {
			t.Errorf("the container was stopped with %q, want USR1", got)
		}
	})

	t.Run("gate off", func(t *testing.T) {
		n := framework.NewNodelet(t, s, "e2e-stopsignal-off")
		port := framework.FreePort(t)
		n.AppendConfig(fmt.Sprintf("readOnlyPort: %d\n", port))
		n.Start()
		n.WriteManifest("refused.yaml", manifest("refused"))
		pod := n.PodName("refused")
		waitRunning(t, s, pod, "plain", 60*time.Second)
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
			for _, p := range pods(port) {
				if p.Name == pod && waitingReason(&p, "CreateContainerConfigError",
					"lifecycle.stopSignal SIGUSR1 needs the feature gate ContainerStopSignals, which is off on this node") {
					return true
				}
			}
			return false
		}, "the container refused with a message naming the gate")
		if s.RunningContainer(t, pod, "c") != nil {
			t.Error("the container with a stop signal runs with the gate off")
		}
	})
}
