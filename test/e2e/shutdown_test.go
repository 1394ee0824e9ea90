package e2e

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// The pod status of a pod stopped for a node shutdown, as upstream's
// node_shutdown_linux_test.go checks it.
const (
	podShutdownReason  = "Terminated"
	podShutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// graceOverridePod is upstream's getGracePeriodOverrideTestPod: a pod that
// ignores SIGTERM, so it stops only when its grace period ends.
func graceOverridePod(name, node string, grace int64, priorityClass string) *v1.Pod {
	p := busyboxPod(name, node, `_term() { echo "Caught SIGTERM signal!"; while true; do sleep 1; done; }
trap _term TERM
while true; do sleep 1; done`)
	p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	p.Spec.PriorityClassName = priorityClass
	return p
}

// createReadyPods creates the pods in ns and waits for each to be ready.
func createReadyPods(t *testing.T, c *framework.Cluster, ns string, pods ...*v1.Pod) {
	t.Helper()
	createPods(t, c, ns, pods...)
	for _, p := range pods {
		waitPod(t, c, ns, p.Name, 90*time.Second, "running and ready", podReady)
	}
}

// isPodShutdown is upstream's: Failed, the shutdown's reason and message,
// ContainersReady False.
func isPodShutdown(p *v1.Pod) bool {
	notReady := false
	for _, c := range p.Status.Conditions {
		if c.Type == v1.ContainersReady && c.Status == v1.ConditionFalse {
			notReady = true
		}
	}
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == podShutdownReason && p.Status.Message == podShutdownMessage && notReady
}

// shutdownWatch records, from a watch of the namespace's pods, when each
// pod was first seen shut down, and any status upstream's #108594 forbids
// (Failed and Ready at once).
type shutdownWatch struct {
	mu      sync.Mutex
	at      map[string]time.Time
	pods    map[string]*v1.Pod
	invalid []string
}

func watchShutdowns(t *testing.T, c *framework.Cluster, ns string) *shutdownWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sw := &shutdownWatch{at: map[string]time.Time{}, pods: map[string]*v1.Pod{}}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			sw.mu.Lock()
			sw.pods[p.Name] = p
			if _, seen := sw.at[p.Name]; !seen && isPodShutdown(p) {
				sw.at[p.Name] = time.Now()
			}
			if p.Status.Phase == v1.PodFailed && podReady(p) {
				sw.invalid = append(sw.invalid, p.Name)
			}
			sw.mu.Unlock()
		}
	}()
	return sw
}

func (sw *shutdownWatch) shutdownAt(name string) (time.Time, bool) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	at, ok := sw.at[name]
	return at, ok
}

func (sw *shutdownWatch) check(t *testing.T) {
	t.Helper()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.invalid) > 0 {
		t.Errorf("pods reported Failed and Ready at once (upstream #108594): %v", sw.invalid)
	}
}

// logindEvent is the time of the fake logind's first event of kind after
// since (and whether there is one).
func logindEvent(t *testing.T, l *framework.Logind, kind string, since time.Time) (framework.LogindEvent, bool) {
	t.Helper()
	for _, e := range l.Events(t) {
		if e.Event == kind && !e.Time.Before(since) {
			return e, true
		}
	}
	return framework.LogindEvent{}, false
}

// sampleValue is a sample's value in a Prometheus text exposition.
func sampleValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// TestGracefulNodeShutdown mirrors upstream's GracefulNodeShutdown "when
// gracefully shutting down" cases (shutdownGracePeriod 20 s, critical pods
// 10 s) against the fake logind: nodelet raises logind's 5 s
// InhibitDelayMaxSec to 20 s (drop-in, reload) and holds a delay lock
// systemd-inhibit lists. The machine is powered off through logind:
// the node goes NotReady ("node is shutting down"), new pods are refused
// (NodeShutdown), the regular pods stop first (Failed, Terminated,
// upstream's message, DisruptionTarget) while the critical ones run, then
// the critical ones; the lock goes and logind proceeds before its delay;
// the lease kept renewing; never Failed and Ready at once; the metrics have
// the shutdown's times. Then PrepareForShutdown(false): the node is Ready
// again, admits pods, and holds a new lock.
func TestGracefulNodeShutdown(t *testing.T) {
	name := "e2e-shutdown"
	c := framework.RequireCluster(t)
	logind := framework.StartLogind(t, "")
	n := framework.NewClusterNodelet(t, c, name)
	n.Env = logind.Env()
	n.AppendConfig("shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 10s\n")
	startNode(t, c, n)

	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(logind.Inhibitors(t), "Kubelet needs time to handle node shutdown")
	}, "systemd-inhibit --list shows the kubelet's lock")
	list := logind.Inhibitors(t)
	for _, want := range []string{"kubelet", "shutdown", "delay"} {
		if !strings.Contains(list, want) {
			t.Errorf("systemd-inhibit --list lacks %q:\n%s", want, list)
		}
	}
	if got := strings.TrimSpace(logind.Busctl(t, "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
		"org.freedesktop.login1.Manager", "InhibitDelayMaxUSec")); got != "t 20000000" {
		t.Errorf("InhibitDelayMaxUSec %q after nodelet started, want t 20000000 (raised from logind's 5 s)", got)
	}
	if b, err := os.ReadFile(framework.LogindConfDrop); err != nil || !strings.Contains(string(b), "InhibitDelayMaxSec=20") {
		t.Errorf("%s: %q %v", framework.LogindConfDrop, b, err)
	}

	ns := c.Namespace(t, "shutdown")
	pods := []*v1.Pod{
		graceOverridePod("period-120", name, 120, ""),
		graceOverridePod("period-5", name, 5, ""),
		graceOverridePod("period-critical-120", name, 120, "system-node-critical"),
		graceOverridePod("period-critical-5", name, 5, "system-node-critical"),
	}
	createReadyPods(t, c, ns, pods...)
	sw := watchShutdowns(t, c, ns)
	ctx := context.Background()
	lease0, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	before := time.Now().Add(-time.Second)
	logind.PowerOff(t)
	sig, ok := logindEvent(t, logind, "PrepareForShutdown", before)
	if !ok {
		t.Fatal("the fake logind did not record PrepareForShutdown")
	}
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		cond := nodeCondition(t, c, name, v1.NodeReady)
		return cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == "KubeletNotReady" && cond.Message == "node is shutting down"
	}, "node NotReady: node is shutting down")
	notReadyAfter := time.Since(sig.Time)

	late := busyboxPod("late", name, "sleep 3600")
	createPods(t, c, ns, late)
	rejected := waitPod(t, c, ns, "late", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if rejected.Status.Reason != "NodeShutdown" || rejected.Status.Message != "Pod was rejected: Pod was rejected as the node is shutting down." {
		t.Errorf("pod created during the shutdown: %s %q, want NodeShutdown", rejected.Status.Reason, rejected.Status.Message)
	}

	// Regular pods first, while the critical ones run.
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, a := sw.shutdownAt("period-120")
		_, b := sw.shutdownAt("period-5")
		return a && b
	}, "regular pods shut down")
	regularDone := time.Now()
	for _, crit := range []string{"period-critical-120", "period-critical-5"} {
		if at, ok := sw.shutdownAt(crit); ok && at.Before(regularDone.Add(-time.Second)) {
			t.Errorf("%s shut down at %v, before the regular pods", crit, at.Sub(sig.Time))
		}
	}
	framework.Eventually(t, 40*time.Second, 200*time.Millisecond, func() bool {
		_, a := sw.shutdownAt("period-critical-120")
		_, b := sw.shutdownAt("period-critical-5")
		return a && b
	}, "critical pods shut down")
	sw.check(t)
	var timeline []string
	for _, p := range pods {
		at, _ := sw.shutdownAt(p.Name)
		timeline = append(timeline, p.Name+" "+at.Sub(sig.Time).Round(100*time.Millisecond).String())
	}
	sort.Strings(timeline)
	for _, p := range pods {
		got := c.Pod(t, ns, p.Name)
		dt := disruptionTarget(got)
		if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != "TerminationByKubelet" || dt.Message != podShutdownMessage {
			t.Errorf("%s: DisruptionTarget %+v", p.Name, dt)
		}
	}
	// Regular pods: grace min(own, 10 s); critical: from the end of the
	// regular group (10 s at most) plus min(own, 10 s).
	for name, limit := range map[string]time.Duration{"period-5": 10 * time.Second, "period-120": 15 * time.Second,
		"period-critical-5": 20 * time.Second, "period-critical-120": 25 * time.Second} {
		if at, _ := sw.shutdownAt(name); at.Sub(sig.Time) > limit {
			t.Errorf("%s shut down %v after the signal, want within %v", name, at.Sub(sig.Time), limit)
		}
	}

	// The lock goes once the pods are stopped. The last critical pod is
	// killed at its 10 s grace, 10 s after the regular group's end, so the
	// release lands at about 20 s, the very delay logind grants: logind may
	// go on either on the release or on its timer (the same race as
	// upstream's), but the release must come within the period.
	var off framework.LogindEvent
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		off, ok = logindEvent(t, logind, "PowerOff", before)
		return ok
	}, "logind proceeds with the power-off")
	var released framework.LogindEvent
	framework.Eventually(t, 5*time.Second, 200*time.Millisecond, func() bool {
		released, ok = logindEvent(t, logind, "InhibitorReleased", sig.Time)
		return ok
	}, "the delay lock released")
	if d := released.Time.Sub(sig.Time); d > 21*time.Second {
		t.Errorf("lock released %v after PrepareForShutdown, want within the 20 s period", d)
	}
	t.Logf("shutdown timeline (since PrepareForShutdown): node NotReady within %v; pods shut down (first seen in the API): %s; lock released %v; logind powers off %v",
		notReadyAfter.Round(100*time.Millisecond), strings.Join(timeline, ", "), released.Time.Sub(sig.Time).Round(100*time.Millisecond),
		off.Time.Sub(sig.Time).Round(100*time.Millisecond))

	lease, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Spec.RenewTime.After(sig.Time.Add(5*time.Second)) || !lease.Spec.RenewTime.After(lease0.Spec.RenewTime.Time) {
		t.Errorf("lease renewed at %v, the shutdown began at %v: not renewed during the shutdown", lease.Spec.RenewTime, sig.Time)
	}
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	start, end := sampleValue(t, body, "kubelet_graceful_shutdown_start_time_seconds"), sampleValue(t, body, "kubelet_graceful_shutdown_end_time_seconds")
	if start < float64(sig.Time.Unix()-1) || end < start {
		t.Errorf("kubelet_graceful_shutdown_start_time_seconds %v end %v, shutdown at %v", start, end, sig.Time.Unix())
	}

	// Cancelled: Ready again, pods admitted, a new lock.
	logind.Emit(t, false)
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node Ready after the cancellation")
	createPods(t, c, ns, busyboxPod("after", name, "sleep 3600"))
	waitPod(t, c, ns, "after", 60*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(logind.Inhibitors(t), "Kubelet needs time to handle node shutdown")
	}, "the lock taken again")
}

// TestGracefulNodeShutdownByPodPriority mirrors upstream's
// "GracefulNodeShutdownBasedOnPodPriority" case with
// shutdownGracePeriodByPodPriority: five bands (default, three custom
// classes, system critical), 3 s each; one SIGTERM-ignoring pod per band
// stops at its band's end, lowest priority first. PrepareForShutdown is
// sent on the bus (as upstream's test does); cancelled while the third band
// stops, the higher bands' pods keep running (beyond upstream, whose
// cancellation waits for every band) and the node is Ready again.
func TestGracefulNodeShutdownByPodPriority(t *testing.T) {
	name := "e2e-shutdown-prio"
	c := framework.RequireCluster(t)
	logind := framework.StartLogind(t, "")
	priorityClass(t, c, "e2e-shutdown-a", 100000)
	priorityClass(t, c, "e2e-shutdown-b", 10000)
	priorityClass(t, c, "e2e-shutdown-c", 1000)
	n := framework.NewClusterNodelet(t, c, name)
	n.Env = logind.Env()
	n.AppendConfig(`shutdownGracePeriodByPodPriority:
- {priority: 2000000000, shutdownGracePeriodSeconds: 3}
- {priority: 100000, shutdownGracePeriodSeconds: 3}
- {priority: 10000, shutdownGracePeriodSeconds: 6}
- {priority: 1000, shutdownGracePeriodSeconds: 3}
- {priority: 0, shutdownGracePeriodSeconds: 3}
`)
	startNode(t, c, n)
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(logind.Inhibitors(t), "kubelet")
	}, "the kubelet's lock")

	ns := c.Namespace(t, "shutdown-prio")
	order := []*v1.Pod{
		graceOverridePod("default", name, 120, ""),
		graceOverridePod("class-c", name, 120, "e2e-shutdown-c"),
		graceOverridePod("class-b", name, 120, "e2e-shutdown-b"),
		graceOverridePod("class-a", name, 120, "e2e-shutdown-a"),
		graceOverridePod("critical", name, 120, "system-node-critical"),
	}
	createReadyPods(t, c, ns, order...)
	sw := watchShutdowns(t, c, ns)
	start := time.Now()
	logind.Emit(t, true)
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, ok := sw.shutdownAt("class-c")
		return ok
	}, "the class-c band stopped")
	// class-b's band (6 s) is stopping: cancel.
	logind.Emit(t, false)
	cancelled := time.Now()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node Ready after the cancellation")
	var prev time.Time
	for _, p := range order[:2] {
		at, ok := sw.shutdownAt(p.Name)
		if !ok || at.Before(prev) {
			t.Errorf("%s shut down at %v (ok %v), before the band below it", p.Name, at.Sub(start), ok)
		}
		prev = at
		t.Logf("%s shut down %v after PrepareForShutdown", p.Name, at.Sub(start).Round(100*time.Millisecond))
	}
	// Past what the remaining bands would have taken.
	time.Sleep(time.Until(cancelled.Add(15 * time.Second)))
	for _, p := range order[3:] {
		if _, ok := sw.shutdownAt(p.Name); ok {
			t.Errorf("%s shut down after the cancellation", p.Name)
		}
		wantRunning(t, c, ns, p.Name)
	}
	sw.check(t)
}
