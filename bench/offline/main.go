// Command offline runs the offline-autonomy scenario side by side: nodelet
// and the upstream kubelet, in turn, join the stack's control plane as node
// bench-offline and run three API pods that read a ConfigMap (volume and
// env) and have the default token volume: steady (a loop), crasher (exits 2
// after 8 s, restartPolicy Always) and doomed (a loop). Then, per agent:
//
//  1. restart: the agent is killed; doomed is deleted (grace 0) and fresh
//     created while it is down; the API server is killed; the agent is
//     started again. Over 30 s: does steady keep its container, is the
//     crasher restarted, does doomed keep running (nothing may be removed
//     for lack of the API server)?
//  2. reboot: the agent is stopped, every sandbox and container of the
//     pods removed from containerd and their tmpfs volumes unmounted; the
//     agent is started again, still without the API server. Which pods run
//     again, and how long after the start?
//  3. the API server is started: how long until the node converges (doomed
//     stopped, fresh running, one ready sandbox per pod, the crasher's
//     restart count written)?
//
// It writes the runs as JSON and a Markdown section.
//
//	go run ./bench/offline -doc docs/benchmarks.md
//
// Run as root from the repository root with the stack and the control plane
// up (hack/bench.sh does both). About 5 minutes per agent.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/bench/internal/benchkit"
	nodeagent "github.com/nodelet/nodelet/test/agent"
	"github.com/nodelet/nodelet/test/e2e/framework"
)

const (
	namespace = "bench-offline"
	loop      = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
)

// Result is one agent's run.
type Result struct {
	Agent string `json:"agent"`
	// Restart (agent killed and started while the API server is gone).
	SteadyKept       bool `json:"steadyKept"`
	CrasherRestarts  int  `json:"crasherRestarts"`
	DoomedRunning    bool `json:"doomedRunning"`
	RestartWindowSec int  `json:"restartWindowSec"`
	// Reboot (containerd emptied, agent started without the API server).
	RebootRunning []string `json:"rebootRunning"`
	// RebootAllRunning is the time from the agent's start to all three
	// running (0 if they did not within RebootWindowSec).
	RebootAllRunning float64 `json:"rebootAllRunning"`
	RebootWindowSec  int     `json:"rebootWindowSec"`
	// API server back: seconds from its first answer to convergence (-1:
	// not within 2 minutes), and what was seen meanwhile; APIStart is from
	// its start to its first answer.
	Converged       float64 `json:"converged"`
	APIStart        float64 `json:"apiStart"`
	MaxReadySandbox int     `json:"maxReadySandboxes"`
	CrasherAPICount int32   `json:"crasherApiRestartCount"`
	NotConverged    string  `json:"notConverged,omitempty"`
}

type run struct {
	client kubernetes.Interface
	rt     internalapi.RuntimeService
	env    map[string]string
	ns     string
}

func main() {
	p := benchkit.New("offline", "bench-offline")
	p.Namespaces = namespace + "-"
	p.Run(func(b *benchkit.Bench) error {
		results, err := benchkit.Each(b, func(name string) (Result, error) {
			r, err := measure(b, name)
			// Whatever happened, the API server comes back for the next.
			if startErr := nodeagent.StartAPIServer(b.Client); startErr != nil {
				return r, fmt.Errorf("start the API server: %w", startErr)
			}
			if err != nil {
				return r, err
			}
			log.Printf("%s: %+v", name, r)
			b.Clean(context.Background(), "")
			return r, nil
		})
		if err != nil {
			return err
		}
		return p.Write(results, report(results, time.Now()))
	})
}

func pod(name, node, image, script string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
		Volumes: []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}},
		Containers: []v1.Container{{Name: "c", Image: image, Command: []string{"sh", "-c", script},
			VolumeMounts: []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}},
			Env: []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}}}}}}}
}

// containers are the runtime's containers of pod name in the run's
// namespace, newest attempt first is not guaranteed.
func (r run) containers(name string) []*runtimeapi.Container {
	cs, err := r.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		"io.kubernetes.pod.namespace": r.ns, "io.kubernetes.pod.name": name}})
	if err != nil {
		return nil
	}
	return cs
}

// running is pod name's running container, nil if none.
func (r run) running(name string) *runtimeapi.Container {
	for _, c := range r.containers(name) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c
		}
	}
	return nil
}

// attempts is the highest container attempt of pod name, -1 if none.
func (r run) attempts(name string) int {
	max := -1
	for _, c := range r.containers(name) {
		if a := int(c.GetMetadata().GetAttempt()); a > max {
			max = a
		}
	}
	return max
}

// readySandboxes counts pod name's ready sandboxes.
func (r run) readySandboxes(name string) int {
	boxes, err := r.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": r.ns, "io.kubernetes.pod.name": name},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return -1
	}
	return len(boxes)
}

func measure(bench *benchkit.Bench, name string) (Result, error) {
	res := Result{Agent: name, RestartWindowSec: 30, RebootWindowSec: 45, Converged: -1}
	r := run{client: bench.Client, rt: bench.Runtime, env: bench.Env, ns: namespace + "-" + name}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "agent-"+name+"-")
	if err != nil {
		return res, err
	}
	node := bench.Node
	spec := bench.Spec(name)
	spec.Dir = dir
	a, err := nodeagent.Start(spec)
	if err != nil {
		return res, err
	}
	defer func() {
		a.Stop()
		framework.UnmountUnder(dir, log.Printf)
		_ = os.RemoveAll(dir)
	}()
	if err := nodeagent.WaitNodeReady(ctx, r.client, node, a, 2*time.Minute); err != nil {
		return res, err
	}
	c := r.client.CoreV1()
	if _, err := nodeagent.CreateNamespace(ctx, r.client, r.ns); err != nil {
		return res, err
	}
	if _, err := c.ConfigMaps(r.ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	image := bench.Env["BUSYBOX_IMAGE"]
	for _, p := range []*v1.Pod{pod("steady", node, image, loop), pod("crasher", node, image, "trap 'exit 0' TERM; sleep 8; exit 2"), pod("doomed", node, image, loop)} {
		if _, err := c.Pods(r.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	if !poll(90*time.Second, func() bool {
		return r.running("steady") != nil && r.running("crasher") != nil && r.running("doomed") != nil
	}) {
		return res, fmt.Errorf("the pods do not run (log %s)", a.LogPath())
	}
	time.Sleep(4 * time.Second) // nodelet's checkpoint writes every 2 s

	// 1. restart
	steadyID := r.running("steady").Id
	a.Kill()
	crasherBefore := r.attempts("crasher")
	if err := c.Pods(r.ns).Delete(ctx, "doomed", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		return res, err
	}
	if _, err := c.Pods(r.ns).Create(ctx, pod("fresh", node, image, loop), metav1.CreateOptions{}); err != nil {
		return res, err
	}
	if err := nodeagent.StopAPIServer(); err != nil {
		return res, err
	}
	log.Printf("%s: API server stopped; starting the agent again", name)
	if a, err = nodeagent.Start(spec); err != nil {
		return res, err
	}
	time.Sleep(time.Duration(res.RestartWindowSec) * time.Second)
	if rc := r.running("steady"); rc != nil && rc.Id == steadyID {
		res.SteadyKept = true
	}
	res.CrasherRestarts = max(0, r.attempts("crasher")-crasherBefore)
	res.DoomedRunning = r.running("doomed") != nil
	log.Printf("%s: restart offline: steady kept %v, crasher restarts %d, doomed running %v", name, res.SteadyKept, res.CrasherRestarts, res.DoomedRunning)

	// 2. reboot
	a.Stop()
	cleaner := nodeagent.Cleaner{Client: r.client, Runtime: r.rt, Node: node, Mine: func(ns string) bool { return ns == r.ns }}
	if err := cleaner.RemoveSandboxes(ctx, r.ns); err != nil {
		return res, err
	}
	framework.UnmountUnder(filepath.Join(dir, "root", "pods"), log.Printf)
	start := time.Now()
	if a, err = nodeagent.Start(spec); err != nil {
		return res, err
	}
	seen := map[string]bool{}
	poll(time.Duration(res.RebootWindowSec)*time.Second, func() bool {
		for _, p := range []string{"steady", "crasher", "doomed"} {
			if !seen[p] && r.running(p) != nil {
				seen[p] = true
				res.RebootRunning = append(res.RebootRunning, p)
			}
		}
		if len(seen) == 3 && res.RebootAllRunning == 0 {
			res.RebootAllRunning = time.Since(start).Seconds()
		}
		return len(seen) == 3
	})
	log.Printf("%s: reboot offline: running %v, all after %.2f s", name, res.RebootRunning, res.RebootAllRunning)

	// 3. the API server back: convergence from the moment it answers
	// (StartAPIServer also waits for the controller manager, which takes
	// longer).
	apiStart := time.Now()
	started := make(chan error, 1)
	go func() { started <- nodeagent.StartAPIServer(r.client) }()
	if !poll(2*time.Minute, func() bool { _, err := r.client.Discovery().ServerVersion(); return err == nil }) {
		return res, errors.New("the API server does not answer")
	}
	back := time.Now()
	res.APIStart = back.Sub(apiStart).Seconds()
	var why string
	converged := poll(2*time.Minute, func() bool {
		for _, p := range []string{"steady", "crasher", "fresh"} {
			res.MaxReadySandbox = max(res.MaxReadySandbox, r.readySandboxes(p))
		}
		why = notConverged(ctx, r)
		return why == ""
	})
	if converged {
		res.Converged = time.Since(back).Seconds()
	} else {
		res.NotConverged = why
	}
	if err := <-started; err != nil {
		return res, err
	}
	if p, err := c.Pods(r.ns).Get(ctx, "crasher", metav1.GetOptions{}); err == nil && len(p.Status.ContainerStatuses) == 1 {
		res.CrasherAPICount = p.Status.ContainerStatuses[0].RestartCount
	}
	log.Printf("%s: API server back: converged after %.2f s (%s)", name, res.Converged, why)
	return res, nil
}

// notConverged says what still differs from the API server's view, "" when
// nothing does: doomed stopped, steady and fresh running and Running in the
// API, the crasher's restarts in the API at least those the runtime made,
// one ready sandbox per pod.
func notConverged(ctx context.Context, r run) string {
	if r.readySandboxes("doomed") != 0 {
		return "doomed still has a ready sandbox"
	}
	for _, name := range []string{"steady", "crasher", "fresh"} {
		if n := r.readySandboxes(name); n != 1 {
			return fmt.Sprintf("%s has %d ready sandboxes", name, n)
		}
	}
	for _, name := range []string{"steady", "fresh"} {
		p, err := r.client.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		rc := r.running(name)
		if rc == nil || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].ContainerID != "containerd://"+rc.Id {
			return name + " not Running in the API with its running container"
		}
	}
	p, err := r.client.CoreV1().Pods(r.ns).Get(ctx, "crasher", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if a := r.attempts("crasher"); len(p.Status.ContainerStatuses) != 1 || int(p.Status.ContainerStatuses[0].RestartCount) < a {
		return fmt.Sprintf("the crasher's restarts not in the API (runtime attempt %d)", a)
	}
	return ""
}

// poll is agent.Poll at this benchmark's interval.
func poll(timeout time.Duration, cond func() bool) bool {
	return nodeagent.Poll(timeout, 200*time.Millisecond, cond)
}
