package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestClusterResizeReportedStuck: the in-place resizes upstream users
// reported stuck InProgress (kubernetes issues 123441, 125559, 126388,
// 128977) or flapping back to InProgress after completing (128993), each
// replayed on nodelet as reported (smaller quantities). Each must finish
// within 30 s: no resize condition left, status.containerStatuses[0].
// resources and allocatedResources as asked; once finished the status
// never shows the old value or a resize condition again (every status
// update of the pod is watched from before the resize until 10 s after).
func TestClusterResizeReportedStuck(t *testing.T) {
	name := "e2e-resize-reported"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "resize-reported")
	ctx := context.Background()
	q := resource.MustParse
	list := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return out
	}
	policy := func(cpu, mem v1.ResourceResizeRestartPolicy) []v1.ContainerResizePolicy {
		return []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: cpu}, {ResourceName: v1.ResourceMemory, RestartPolicy: mem}}
	}
	for _, tc := range []struct {
		issue, what string
		before      v1.ResourceRequirements
		policy      []v1.ContainerResizePolicy
		patch       string // the container's "resources" in the resize patch
		want        v1.ResourceRequirements
		restarts    int32
	}{
		{"123441", "a Guaranteed pod's CPU", v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "64Mi"), Limits: list("cpu", "200m", "memory", "64Mi")},
			policy(v1.NotRequired, v1.NotRequired), `{"requests":{"cpu":"300m"},"limits":{"cpu":"300m"}}`,
			v1.ResourceRequirements{Requests: list("cpu", "300m", "memory", "64Mi"), Limits: list("cpu", "300m", "memory", "64Mi")}, 0},
		{"125559", "a Burstable pod's memory request alone, RestartContainer", v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "32Mi"), Limits: list("cpu", "200m", "memory", "128Mi")},
			policy(v1.RestartContainer, v1.RestartContainer), `{"requests":{"memory":"64Mi"}}`,
			v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "64Mi"), Limits: list("cpu", "200m", "memory", "128Mi")}, 1},
		{"126388", "a CPU request with no limit at all", v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "64Mi")},
			policy(v1.NotRequired, v1.NotRequired), `{"requests":{"cpu":"300m"}}`,
			v1.ResourceRequirements{Requests: list("cpu", "300m", "memory", "64Mi")}, 0},
		{"128977", "a CPU request with only a memory limit", v1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "32Mi"), Limits: list("memory", "128Mi")},
			policy(v1.NotRequired, v1.NotRequired), `{"requests":{"cpu":"200m"}}`,
			v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "32Mi"), Limits: list("memory", "128Mi")}, 0},
		{"128993", "a CPU request lowered", v1.ResourceRequirements{Requests: list("cpu", "200m", "memory", "32Mi"), Limits: list("cpu", "400m", "memory", "64Mi")},
			policy(v1.NotRequired, v1.NotRequired), `{"requests":{"cpu":"100m"}}`,
			v1.ResourceRequirements{Requests: list("cpu", "100m", "memory", "32Mi"), Limits: list("cpu", "400m", "memory", "64Mi")}, 0},
	} {
		t.Run(tc.issue, func(t *testing.T) {
			podName := "issue-" + tc.issue
			pod := busyboxPod(podName, name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
			pod.Spec.Containers[0].Resources = tc.before
			pod.Spec.Containers[0].ResizePolicy = tc.policy
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitPod(t, c, ns, podName, 60*time.Second, "Ready", podReady)
			w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + podName, ResourceVersion: p.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			body := fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":%s}]}}`, tc.patch)
			start := time.Now()
			if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, podName, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "resize"); err != nil {
				t.Fatal(err)
			}
			done := resized(map[string]v1.ResourceRequirements{"c": tc.want})
			var finished time.Duration
			var history []string
			timeout := time.After(30 * time.Second)
			for after := time.After(time.Hour); ; {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatal("the watch ended")
					}
					p, isPod := ev.Object.(*v1.Pod)
					if ev.Type != watch.Modified || !isPod {
						continue
					}
					history = append(history, describeResize(p))
					switch {
					case finished == 0 && done(p):
						finished = time.Since(start)
						timeout, after = nil, time.After(10*time.Second)
					case finished != 0 && !done(p):
						t.Errorf("issue %s (%s): the finished resize came back: %s", tc.issue, tc.what, strings.Join(history, " -> "))
					}
					continue
				case <-timeout:
					t.Fatalf("issue %s (%s): not finished in 30 s: %s", tc.issue, tc.what, strings.Join(history, " -> "))
				case <-after:
				}
				break
			}
			p, err = c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := containerStatus(p, "c").RestartCount; got != tc.restarts {
				t.Errorf("issue %s: restartCount %d, want %d", tc.issue, got, tc.restarts)
			}
			t.Logf("issue %s (%s): finished in %v, %d status updates, restartCount %d", tc.issue, tc.what,
				finished.Round(10*time.Millisecond), len(history), containerStatus(p, "c").RestartCount)
		})
	}
}

// describeResize is a pod's resize state in one word: its resize
// conditions and container c's status resources.
func describeResize(p *v1.Pod) string {
	var conds []string
	for _, t := range []v1.PodConditionType{v1.PodResizePending, v1.PodResizeInProgress} {
		if cond := hasCondition(p, t); cond != nil {
			conds = append(conds, string(t)+"/"+cond.Reason)
		}
	}
	res := "-"
	if cs := containerStatus(p, "c"); cs != nil && cs.Resources != nil {
		res = fmt.Sprintf("req%v,lim%v", cs.Resources.Requests, cs.Resources.Limits)
	}
	return fmt.Sprintf("[%s %s]", strings.Join(conds, ","), res)
}
