package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// stopsOnTerm is a container that exits 0 on SIGTERM, as the pause image
// of upstream's test does.
const stopsOnTerm = `trap "exit 0" TERM; while true; do sleep 1; done`

// TestCriticalPodPreemption is upstream's e2e_node critical_pod_test on a
// cluster node: a BestEffort, a Burstable and a Guaranteed pod run (100m
// and 100Mi each for the last two), then a system-node-critical pod asks
// for all of the node's allocatable cpu and memory. It is admitted after
// the Burstable and Guaranteed pods were preempted: those end Succeeded
// (their containers exited 0 on SIGTERM, as upstream reports a terminal
// pod) with the DisruptionTarget condition (TerminationByKubelet) and a
// Preempting event, kubelet_preemptions counts them; the BestEffort pod
// frees nothing that is short and keeps running. A critical pod that no
// preemption could fit is refused with UnexpectedAdmissionError, and a pod
// that is not critical is refused OutOfcpu without preempting anyone.
func TestCriticalPodPreemption(t *testing.T) {
	name := "e2e-preempt"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "preempt")
	ctx := context.Background()
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Status.Allocatable
	small := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("100Mi")}
	bestEffort := busyboxPod("best-effort", name, stopsOnTerm)
	burstable := busyboxPod("burstable", name, stopsOnTerm)
	burstable.Spec.Containers[0].Resources.Requests = small
	guaranteed := busyboxPod("guaranteed", name, stopsOnTerm)
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: small, Limits: small}
	createReadyPods(t, c, ns, bestEffort, burstable, guaranteed)

	// Not critical: refused, nobody preempted.
	greedy := busyboxPod("greedy", name, "sleep 3600")
	greedy.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: alloc[v1.ResourceCPU]}
	createPods(t, c, ns, greedy)
	waitPod(t, c, ns, "greedy", 30*time.Second, "refused OutOfcpu", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfcpu"
	})

	critical := busyboxPod("static-critical-pod", name, "sleep 3600")
	critical.Spec.PriorityClassName = "system-node-critical"
	critical.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: alloc[v1.ResourceCPU], v1.ResourceMemory: alloc[v1.ResourceMemory]}
	createPods(t, c, "kube-system", critical)
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Pods("kube-system").Delete(context.Background(), critical.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	started := time.Now()
	waitPod(t, c, "kube-system", critical.Name, 90*time.Second, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	t.Logf("critical pod running %v after its creation", time.Since(started).Round(100*time.Millisecond))

	for _, victim := range []string{"burstable", "guaranteed"} {
		p := waitPod(t, c, ns, victim, 30*time.Second, "preempted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
		if cond := disruptionTarget(p); cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "TerminationByKubelet" ||
			cond.Message != "Pod was preempted by Kubelet to accommodate a critical pod." {
			t.Errorf("%s: DisruptionTarget %+v", victim, cond)
		}
		found := false
		for _, e := range podEvents(t, c, ns, victim) {
			if e.Reason == "Preempting" && e.Type == v1.EventTypeWarning && e.Message == "Preempted in order to admit critical pod" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no Preempting event", victim)
		}
	}
	if p := c.Pod(t, ns, "best-effort"); p.Status.Phase != v1.PodRunning {
		t.Errorf("best-effort is %s (%s), want Running", p.Status.Phase, p.Status.Reason)
	}
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	if !strings.Contains(body, `kubelet_preemptions{preemption_signal="cpu"} 2`) {
		t.Errorf("kubelet_preemptions:\n%s", grepLines(body, "kubelet_preemptions"))
	}

	// Twice the node: nothing to preempt frees that much.
	huge := busyboxPod("huge-critical", name, "sleep 3600")
	huge.Spec.PriorityClassName = "system-node-critical"
	twice := alloc[v1.ResourceCPU].DeepCopy()
	twice.Add(alloc[v1.ResourceCPU])
	huge.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: twice}
	createPods(t, c, "kube-system", huge)
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Pods("kube-system").Delete(context.Background(), huge.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	p := waitPod(t, c, "kube-system", huge.Name, 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "UnexpectedAdmissionError" ||
		!strings.HasPrefix(p.Status.Message, "Pod was rejected: Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: ") {
		t.Errorf("huge critical pod: %s %q", p.Status.Reason, p.Status.Message)
	}
	if p := c.Pod(t, ns, "best-effort"); p.Status.Phase != v1.PodRunning {
		t.Errorf("best-effort is %s after the refused critical pod, want Running", p.Status.Phase)
	}
}
