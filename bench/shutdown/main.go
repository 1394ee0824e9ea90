// Command shutdown measures graceful node shutdown side by side: nodelet
// and the upstream kubelet, in turn, run as node bench-shutdown with the
// same KubeletConfiguration (shutdownGracePeriod 20 s,
// shutdownGracePeriodCriticalPods 10 s) on a private system bus with the
// fake logind (test/fakes/fakelogind, logind's default 5 s
// InhibitDelayMaxSec, which both agents must raise). Four pods that ignore
// SIGTERM run (upstream's e2e pods: grace periods 120 s and 5 s, regular
// and system-node-critical); the machine is powered off through logind and
// the timeline is recorded from the signal: the node NotReady, each pod
// seen shut down in the API (Failed, Terminated, ContainersReady False),
// the agent's lock released, logind going on; plus any pod reported
// Failed and Ready at once, and whether the pods were stopped in priority
// order. Then shutdowns cancelled (PrepareForShutdown(false)) 2 s after
// they began: how soon the node is Ready again, and which pods were
// stopped anyway. It writes the runs as JSON and a Markdown section.
//
//	go run ./bench/shutdown -doc docs/benchmarks.md
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
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const nsPrefix = "bench-shutdown-"

// Run is one shutdown: seconds from PrepareForShutdown (-1: never).
type Run struct {
	NodeNotReady float64            `json:"nodeNotReady"`
	Pods         map[string]float64 `json:"pods"`
	LockReleased float64            `json:"lockReleased"`
	PowerOff     float64            `json:"powerOff"`
	// LocksReleased: logind went on because the locks went (not its delay).
	LocksReleased bool `json:"locksReleased"`
	// FailedAndReady counts statuses that were Failed and Ready at once.
	FailedAndReady int    `json:"failedAndReady"`
	NotReadyReason string `json:"notReadyReason"`
}

// AgentResult is one agent's runs.
type AgentResult struct {
	Agent   string   `json:"agent"`
	Runs    []Run    `json:"runs"`
	Cancels []Cancel `json:"cancels"`
}

// pods are upstream's e2e pods: name, grace period, priority class.
var pods = []struct {
	name  string
	grace int64
	class string
}{
	{"period-120", 120, ""},
	{"period-5", 5, ""},
	{"period-critical-120", 120, "system-node-critical"},
	{"period-critical-5", 5, "system-node-critical"},
}

func main() {
	p := benchkit.New("shutdown", "bench-shutdown")
	p.Namespaces = nsPrefix
	reps := flag.Int("reps", 3, "shutdowns per agent")
	cancels := flag.Int("cancels", 2, "cancelled shutdowns per agent")
	p.Run(func(b *benchkit.Bench) error {
		fake, err := framework.BuildTool("./test/fakes/fakelogind")
		if err != nil {
			return err
		}
		ctx := context.Background()
		results, err := benchkit.Each(b, func(name string) (AgentResult, error) {
			runs, err := benchkit.Repeat(ctx, b, *reps, func(i int) (Run, error) {
				run, err := measure(b, name, fake, i)
				if err == nil {
					log.Printf("%s run %d: %+v", name, i, run)
				}
				return run, err
			})
			if err != nil {
				return AgentResult{}, err
			}
			cancelled, err := benchkit.Repeat(ctx, b, *cancels, func(i int) (Cancel, error) {
				c, err := measureCancel(b, name, fake, i)
				if err == nil {
					log.Printf("%s cancelled run %d: %+v", name, i, c)
				}
				return c, err
			})
			if err != nil {
				return AgentResult{}, fmt.Errorf("cancelled %w", err)
			}
			return AgentResult{Agent: name, Runs: runs, Cancels: cancelled}, nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

// session is one agent running with the fake logind and the four pods
// ready.
type session struct {
	client kubernetes.Interface
	logind *framework.Logind
	agent  *nodeagent.Proc
	name   string
	node   string
	ns     string
	close  func()
}

// setup starts the fake logind and the agent, and the pods.
func setup(b *benchkit.Bench, name, fake, ns string) (*session, error) {
	ctx := context.Background()
	client, env, node := b.Client, b.Env, b.Node
	var undo []func()
	s := &session{client: client, name: name, node: node, ns: ns, close: func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}}
	fail := func(err error) (*session, error) { s.close(); return nil, err }
	dir, err := os.MkdirTemp("", "shutdown-logind-")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = os.RemoveAll(dir) })
	if s.logind, err = framework.LaunchLogind(dir, fake, ""); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { s.logind.Stop() })
	spec := b.Spec(name)
	spec.ExtraEnv, spec.ExtraConfig = s.logind.Env(), "shutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 10s\n"
	a, err := nodeagent.Start(spec)
	if err != nil {
		return fail(err)
	}
	s.agent = a
	undo = append(undo, func() {
		a.Stop()
		framework.UnmountUnder(a.Dir, log.Printf)
		_ = os.RemoveAll(a.Dir)
	})
	if err := nodeagent.WaitNodeReady(ctx, client, node, a, 2*time.Minute); err != nil {
		return fail(err)
	}
	if !poll(30*time.Second, func() bool { return hasEvent(s.logind, "Inhibit", time.Time{}) }) {
		return fail(fmt.Errorf("%s took no inhibitor lock (log %s)", name, a.LogPath()))
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fail(err)
	}
	if !poll(30*time.Second, func() bool {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}) {
		return fail(fmt.Errorf("no default service account in %s", ns))
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod(p.name, node, env["BUSYBOX_IMAGE"], p.grace, p.class), metav1.CreateOptions{}); err != nil {
			return fail(err)
		}
	}
	if !poll(90*time.Second, func() bool {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != len(pods) {
			return false
		}
		for i := range list.Items {
			if !ready(&list.Items[i]) {
				return false
			}
		}
		return true
	}) {
		return fail(fmt.Errorf("pods not ready (log %s)", a.LogPath()))
	}
	return s, nil
}

// nodeReady is the node's Ready condition (nil if none).
func (s *session) nodeReady() *v1.NodeCondition {
	n, err := s.client.CoreV1().Nodes().Get(context.Background(), s.node, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// measure runs one agent through one shutdown.
func measure(b *benchkit.Bench, name, fake string, i int) (Run, error) {
	ctx := context.Background()
	client := b.Client
	run := Run{NodeNotReady: -1, LockReleased: -1, PowerOff: -1, Pods: map[string]float64{}}
	s, err := setup(b, name, fake, fmt.Sprintf("%s%s-%d", nsPrefix, name, i))
	if err != nil {
		return run, err
	}
	defer s.close()
	logind, a, ns := s.logind, s.agent, s.ns
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := client.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		return run, err
	}
	seen := map[string]time.Time{}
	failedReady := 0
	before := time.Now().Add(-time.Second)
	if err := logind.CallPowerOff(); err != nil {
		return run, err
	}
	var sig time.Time
	if !poll(10*time.Second, func() bool {
		evs, _ := logind.ReadEvents()
		for _, e := range evs {
			if e.Event == "PrepareForShutdown" && e.Time.After(before) {
				sig = e.Time
				return true
			}
		}
		return false
	}) {
		return run, fmt.Errorf("no PrepareForShutdown")
	}
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(seen) < len(pods) || run.NodeNotReady < 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return run, fmt.Errorf("watch ended")
			}
			p, isPod := ev.Object.(*v1.Pod)
			if !isPod {
				continue
			}
			if p.Status.Phase == v1.PodFailed && ready(p) {
				failedReady++
			}
			if _, done := seen[p.Name]; !done && shutDown(p) {
				seen[p.Name] = time.Now()
			}
		case <-tick.C:
			if c := s.nodeReady(); run.NodeNotReady < 0 && c != nil && c.Status == v1.ConditionFalse {
				run.NodeNotReady = time.Since(sig).Seconds()
				run.NotReadyReason = c.Reason + ": " + c.Message
			}
		case <-deadline:
			log.Printf("%s: only %d pods shut down in 60 s (log %s)", name, len(seen), a.LogPath())
			goto done
		}
	}
done:
	for n, at := range seen {
		run.Pods[n] = at.Sub(sig).Seconds()
	}
	run.FailedAndReady = failedReady
	poll(30*time.Second, func() bool { return hasEvent(logind, "PowerOff", sig) })
	evs, _ := logind.ReadEvents()
	for _, e := range evs {
		if e.Time.Before(sig) {
			continue
		}
		switch {
		case e.Event == "InhibitorReleased" && run.LockReleased < 0:
			run.LockReleased = e.Time.Sub(sig).Seconds()
		case e.Event == "PowerOff":
			run.PowerOff = e.Time.Sub(sig).Seconds()
			run.LocksReleased = e.LocksReleased != nil && *e.LocksReleased
		}
	}
	// Cancelled, so the agent stops as after any run.
	_ = logind.EmitSignal(false)
	return run, nil
}

// Cancel is one cancelled shutdown: PrepareForShutdown(true), then
// (false) CancelAfter later.
type Cancel struct {
	// NodeReady: seconds from the cancellation to the node Ready again.
	NodeReady float64 `json:"nodeReady"`
	// Stopped are the pods stopped anyway (seen shut down within 30 s).
	Stopped []string `json:"stopped"`
}

// CancelAfter is how long a cancelled shutdown lasts.
const CancelAfter = 2 * time.Second

// measureCancel runs one agent through a shutdown cancelled after
// CancelAfter.
func measureCancel(b *benchkit.Bench, name, fake string, i int) (Cancel, error) {
	ctx := context.Background()
	out := Cancel{NodeReady: -1, Stopped: []string{}}
	s, err := setup(b, name, fake, fmt.Sprintf("%s%s-cancel-%d", nsPrefix, name, i))
	if err != nil {
		return out, err
	}
	defer s.close()
	if err := s.logind.EmitSignal(true); err != nil {
		return out, err
	}
	if !poll(10*time.Second, func() bool { c := s.nodeReady(); return c != nil && c.Status == v1.ConditionFalse }) {
		return out, fmt.Errorf("node not NotReady after PrepareForShutdown (log %s)", s.agent.LogPath())
	}
	time.Sleep(CancelAfter)
	if err := s.logind.EmitSignal(false); err != nil {
		return out, err
	}
	cancelled := time.Now()
	if poll(60*time.Second, func() bool { c := s.nodeReady(); return c != nil && c.Status == v1.ConditionTrue }) {
		out.NodeReady = time.Since(cancelled).Seconds()
	}
	time.Sleep(time.Until(cancelled.Add(30 * time.Second)))
	list, err := s.client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, err
	}
	for i := range list.Items {
		if shutDown(&list.Items[i]) {
			out.Stopped = append(out.Stopped, list.Items[i].Name)
		}
	}
	sort.Strings(out.Stopped)
	return out, nil
}

func hasEvent(l *framework.Logind, kind string, since time.Time) bool {
	evs, _ := l.ReadEvents()
	for _, e := range evs {
		if e.Event == kind && !e.Time.Before(since) {
			return true
		}
	}
	return false
}

// poll is agent.Poll at this benchmark's interval.
func poll(timeout time.Duration, cond func() bool) bool {
	return nodeagent.Poll(timeout, 100*time.Millisecond, cond)
}

func pod(name, node, image string, grace int64, class string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: ptr.To(grace), PriorityClassName: class,
			Containers: []v1.Container{{Name: "c", Image: image, Command: []string{"sh", "-c",
				`_term() { echo "Caught SIGTERM signal!"; while true; do sleep 1; done; }
trap _term TERM
while true; do sleep 1; done`}}},
		},
	}
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// shutDown is upstream's e2e isPodShutdown.
func shutDown(p *v1.Pod) bool {
	notReady := false
	for _, c := range p.Status.Conditions {
		if c.Type == v1.ContainersReady && c.Status == v1.ConditionFalse {
			notReady = true
		}
	}
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Terminated" &&
		p.Status.Message == "Pod was terminated in response to imminent node shutdown." && notReady
}
