package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// restartLatencies runs pods pods of one long-running container, kills each
// container's main process once and returns, per pod, the time from the old
// container's exit to the new one's start, both as the runtime reports them.
// (Only the first restart of a container is immediate; later ones back off.)
func restartLatencies(t *testing.T, s *framework.Stack, n *framework.Nodelet, pods int) []time.Duration {
	t.Helper()
	var names []string
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("kill%d", i)
		n.WriteManifest(name+".yaml", podManifest(name, "", container("c", "exec sleep 3600")))
		names = append(names, n.PodName(name))
	}
	var out []time.Duration
	for _, pod := range names {
		old := waitRunning(t, s, pod, "c", 60*time.Second)
		// Let any relist the start caused pass, so the kill lands at a
		// random point of the PLEG's period.
		time.Sleep(time.Duration(300+len(out)*270) * time.Millisecond)
		if err := syscall.Kill(mainPid(t, s, old.Id), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var fresh string
		framework.Eventually(t, 30*time.Second, 10*time.Millisecond, func() bool {
			c := s.RunningContainer(t, pod, "c")
			if c != nil && c.Id != old.Id {
				fresh = c.Id
				return true
			}
			return false
		}, "container of %s restarted", pod)
		exited := time.Unix(0, s.ContainerStatus(t, old.Id).FinishedAt)
		started := time.Unix(0, s.ContainerStatus(t, fresh).StartedAt)
		out = append(out, started.Sub(exited))
	}
	return out
}

// mainPid is a container's main process as the runtime reports it.
func mainPid(t *testing.T, s *framework.Stack, id string) int {
	t.Helper()
	resp, err := s.Runtime.ContainerStatus(context.Background(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return pidOf(t, resp.Info)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestEventedPLEG: a dead container is restarted as soon as the runtime
// reports its exit, not at the PLEG's next relist. containerd 1.6 (the
// stack's second configuration, Debian's) has no CRI event stream: nodelet
// follows containerd's own task exit events; containerd v2 (built from the
// Go module proxy) serves CRI GetContainerEvents. With the EventedPLEG feature gate off, nodelet
// relists every second, as upstream's generic PLEG does.
func TestEventedPLEG(t *testing.T) {
	s := framework.RequireStack(t)
	for _, tc := range []struct {
		name, stream string
		containerd   string
		gateOff      bool
	}{
		{name: "containerd-1.6-events", stream: `stream="containerd events"`, containerd: "containerd1"},
		{name: "containerd-2-CRI-events", stream: `stream="CRI GetContainerEvents"`, containerd: "containerd2"},
		{name: "relist-only", gateOff: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := s
			switch {
			case tc.containerd == "" || tc.containerd == s.Env["STACK_RUNTIME"]:
			case tc.containerd == "containerd1":
				rs = framework.StartContainerd1(t, s)
			default:
				rs = framework.StartContainerd2(t, s)
			}
			n := framework.NewNodelet(t, rs, "e2e-pleg")
			if tc.gateOff {
				n.AppendConfig("featureGates:\n  EventedPLEG: false\n")
			}
			n.Start()
			lat := restartLatencies(t, rs, n, 3)
			t.Logf("%s: container exit -> restarted container started: %v (median %v)", tc.name, lat, median(lat))
			log := n.Log()
			if tc.gateOff {
				if strings.Contains(log, "Watching the runtime's events") {
					t.Errorf("EventedPLEG=false still watched events")
				}
				return
			}
			if !strings.Contains(log, "Watching the runtime's events") || !strings.Contains(log, tc.stream) {
				t.Errorf("nodelet never watched the runtime's events with %s", tc.stream)
			}
			// The PLEG relists every 10 s while a stream works: only the
			// event can explain a restart within a second.
			for _, d := range lat {
				if d > time.Second {
					t.Errorf("restart took %v after the exit (want well under the 10 s evented relist period)", d)
				}
			}
		})
	}
}
