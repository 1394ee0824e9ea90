package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestClusterRestartAllContainers: RestartAllContainersOnContainerExits
// (beta, on), upstream's e2e pod: when "source" exits 42 (its rule's
// RestartAllContainers), every container is stopped and removed and the pod
// starts again in the same sandbox from its first init container; each
// container's restart count goes up and its last state is kept; the pod
// has the AllContainersRestarting condition, False once restarted.
func TestClusterRestartAllContainers(t *testing.T) {
	const node = "restartall-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "restartall")
	ctx := context.Background()
	// The node declares the feature (NodeDeclaredFeatures): the scheduler
	// sends such pods only to nodes that do.
	nodeObj, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(nodeObj.Status.DeclaredFeatures, ","); got != "ExtendWebSocketsToKubelet,InPlacePodVerticalScalingInitContainers,RestartAllContainersOnContainerExits" {
		t.Errorf("declaredFeatures %s", got)
	}
	busybox := func(name, script string) v1.Container {
		return v1.Container{Name: name, Image: framework.Busybox, Command: []string{"sh", "-c", script},
			VolumeMounts: []v1.VolumeMount{{Name: "work", MountPath: "/mnt"}}}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "restartall"},
		Spec: v1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 v1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			InitContainers: []v1.Container{
				busybox("init", "echo init >> /mnt/runs; exit 0"),
				busybox("sidecar", "sleep 10000"),
			},
			Containers: []v1.Container{
				busybox("source", "if [ -f /mnt/restart-complete ]; then sleep 10000; else touch /mnt/restart-complete; exit 42; fi"),
				busybox("regular", "sleep 10000"),
			},
			Volumes: []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		},
	}
	pod.Spec.InitContainers[1].RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	pod.Spec.Containers[0].RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
	pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p := waitPod(t, c, ns, "restartall", 120*time.Second, "every container restarted and running", func(p *v1.Pod) bool {
		all := append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		for _, cs := range all {
			if cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil {
				return false
			}
			if cs.Name != "init" && cs.State.Running == nil {
				return false
			}
		}
		return len(all) == 4 && podReady(p)
	})
	t.Logf("every container restarted after %v", time.Since(start).Round(100*time.Millisecond))
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running", p.Status.Phase)
	}
	var cond *v1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.AllContainersRestarting {
			cond = &p.Status.Conditions[i]
		}
	}
	if cond == nil || cond.Status != v1.ConditionFalse {
		t.Errorf("condition AllContainersRestarting %+v, want False once restarted", cond)
	}
	// As upstream, each container's last state is the reset's.
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if last := cs.LastTerminationState.Terminated; last.Reason != "RestartingAllContainers" || last.ExitCode != 137 {
			t.Errorf("%s's last state %+v, want RestartingAllContainers (137)", cs.Name, last)
		}
	}
	// The init container ran twice, in the same sandbox (the emptyDir kept).
	out, err := c.KubectlOut(t, 20*time.Second, "-n", ns, "exec", "restartall", "-c", "regular", "--", "cat", "/mnt/runs")
	if err != nil || strings.Count(out, "init") != 2 {
		t.Errorf("init runs %q (%v), want two", out, err)
	}
	// Restarted once: the source does not trigger again.
	time.Sleep(3 * time.Second)
	p, err = c.Client.CoreV1().Pods(ns).Get(ctx, "restartall", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if cs.RestartCount != 1 {
			t.Errorf("%s restarted %d times, want once", cs.Name, cs.RestartCount)
		}
	}
}

// TestClusterContainerStatusResources: as upstream (InPlacePodVerticalScaling,
// GA), a running container's status.resources are what the runtime applied
// (CPU request from cpu.shares, CPU limit from the CFS quota, memory limit)
// and allocatedResources the spec's requests.
func TestClusterContainerStatusResources(t *testing.T) {
	const node = "statusres-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "statusres")
	ctx := context.Background()
	p := busyboxPod("res", node, "sleep 3600")
	q := resource.MustParse
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("128Mi")}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, c, ns, "res", 60*time.Second, "Ready", podReady)
	cs := got.Status.ContainerStatuses[0]
	want := p.Spec.Containers[0].Resources
	if cs.Resources == nil || !apiequality.Semantic.DeepEqual(*cs.Resources, want) {
		t.Errorf("status resources %v, want %v", cs.Resources, want)
	}
	if !apiequality.Semantic.DeepEqual(cs.AllocatedResources, want.Requests) {
		t.Errorf("allocatedResources %v, want %v", cs.AllocatedResources, want.Requests)
	}
}
