package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

func TestLifecycleHooks(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-hooks")
	n.Start()
	host := t.TempDir()
	hostVolume := fmt.Sprintf(`  volumes:
  - name: host
    hostPath: {path: %s, type: Directory}
`, host)
	mount := `    volumeMounts:
    - {name: host, mountPath: /host}
`
	// preStop writes, then the container's TERM handler writes: the order
	// on the host shows the hook ran before SIGTERM.
	n.WriteManifest("prestop.yaml", podManifest("prestop", "  terminationGracePeriodSeconds: 20\n"+hostVolume,
		container("c", "trap 'echo TERM >> /host/order; exit 0' TERM; echo started > /host/order; while true; do sleep 0.1; done")+mount+
			`    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo prestop >> /host/order; sleep 1"]}
`))
	// The preStop hook's 3 s count against the 5 s grace period of a
	// container that ignores SIGTERM: it is killed ~5 s after deletion.
	n.WriteManifest("budget.yaml", podManifest("budget", "  terminationGracePeriodSeconds: 5\n",
		container("c", "exec sleep 3600")+`    lifecycle:
      preStop:
        sleep: {seconds: 3}
`))
	// A failing postStart hook kills the container.
	n.WriteManifest("poststart.yaml", podManifest("poststart", "  terminationGracePeriodSeconds: 2\n",
		container("c", "sleep 3600")+`    lifecycle:
      postStart:
        exec: {command: ["false"]}
`))
	waitRunning(t, s, n.PodName("prestop"), "c", 60*time.Second)
	budget := waitRunning(t, s, n.PodName("budget"), "c", 60*time.Second)

	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(n.Log(), `reason="FailedPostStartHook"`)
	}, "FailedPostStartHook event")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		cs := s.Containers(t, n.PodName("poststart"), "c")
		return len(cs) > 0 && cs[0].State == runtimeapi.ContainerState_CONTAINER_EXITED
	}, "the container whose postStart hook failed killed")

	start := time.Now()
	n.RemoveManifest("prestop.yaml")
	n.RemoveManifest("budget.yaml")
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, func() bool {
		data, _ := os.ReadFile(filepath.Join(host, "order"))
		return strings.Contains(string(data), "TERM")
	}, "the TERM handler ran")
	if data, _ := os.ReadFile(filepath.Join(host, "order")); string(data) != "started\nprestop\nTERM\n" {
		t.Errorf("order on the host %q, want started, prestop, TERM", data)
	}
	var stopped time.Duration
	framework.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		st, err := s.Runtime.ContainerStatus(t.Context(), budget.Id, false)
		if err != nil {
			stopped = time.Since(start)
			return true
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			stopped = time.Unix(0, st.Status.FinishedAt).Sub(start)
			return true
		}
		return false
	}, "the budget container stopped")
	t.Logf("preStop 3 s + grace 5 s: container killed after %v", stopped)
	if stopped < 4500*time.Millisecond || stopped > 7*time.Second {
		t.Errorf("killed after %v, want ~5 s (the hook's time counted against the grace period)", stopped)
	}
}
