package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// TestPodObservedGeneration mirrors upstream's "pod generation should start
// at 1 and increment per update" and "pod observedGeneration field set in
// pod conditions" (PodObservedGenerationTracking, GA since 1.35): the
// status and every condition the kubelet writes (PodScheduled included)
// carry the pod's generation, and follow a spec update within seconds;
// twenty updates in a row converge.
func TestPodObservedGeneration(t *testing.T) {
	name := "e2e-generation"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "generation")
	p := busyboxPod("gen", name, "sleep 3600")
	p.Spec.ActiveDeadlineSeconds = ptr.To[int64](5000)
	createPods(t, c, ns, p)
	observed := func(gen int64) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool {
			if p.Generation != gen || p.Status.ObservedGeneration != gen {
				return false
			}
			for _, want := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
				c := findPodCondition(p, want)
				if c == nil || c.ObservedGeneration != gen {
					return false
				}
			}
			return true
		}
	}
	waitPod(t, c, ns, "gen", 60*time.Second, "running, generation 1 observed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && observed(1)(p)
	})
	ctx := context.Background()
	update := func() {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.Client.CoreV1().Pods(ns).Get(ctx, "gen", metav1.GetOptions{})
			if err != nil {
				return err
			}
			*cur.Spec.ActiveDeadlineSeconds--
			_, err = c.Client.CoreV1().Pods(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	update()
	start := time.Now()
	waitPod(t, c, ns, "gen", 20*time.Second, "generation 2 observed", observed(2))
	t.Logf("spec update -> generation 2 observed in the status and conditions: %v", time.Since(start).Round(10*time.Millisecond))
	for range 20 {
		update()
	}
	waitPod(t, c, ns, "gen", 30*time.Second, "generation 22 observed", observed(22))
}

func findPodCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestNoExtraSandboxWhenDone mirrors upstream's "should not create extra
// sandbox if all containers are done": an OnFailure pod with an init
// container, both exiting 0, Succeeds, and its stopped sandbox is not
// replaced (no SandboxChanged event, one sandbox in the runtime).
func TestNoExtraSandboxWhenDone(t *testing.T) {
	name := "e2e-no-extra-sandbox"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "sandbox")
	p := busyboxPod("done", name, "true")
	p.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	p.Spec.InitContainers = []v1.Container{{Name: "init", Image: busybox, Command: []string{"true"}}}
	createPods(t, c, ns, p)
	got := waitPod(t, c, ns, "done", 60*time.Second, "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	time.Sleep(5 * time.Second) // a few syncs after the end
	for _, e := range podEvents(t, c, ns, "done") {
		if e.Reason == "SandboxChanged" {
			t.Errorf("SandboxChanged event: %s", e.Message)
		}
	}
	sandboxes, err := c.Runtime.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range sandboxes {
		if s.GetMetadata().GetUid() == string(got.UID) {
			n++
		}
	}
	if n > 1 {
		t.Errorf("%d sandboxes for the pod, want 1", n)
	}
}
