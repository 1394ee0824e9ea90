package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// cgroupLimits reads a cgroup's CFS quota (µs per 100 ms, -1 none), cpu
// shares and memory limit (bytes, -1 none), on v1 (rel under each
// controller's hierarchy) or v2.
func cgroupLimits(t *testing.T, rel string) (quota, shares, memory int64) {
	t.Helper()
	num := func(s string) int64 {
		if s == "max" {
			return -1
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", rel, s)
		}
		if v > 1<<60 {
			return -1
		}
		return v
	}
	if cgroupV1() {
		cpu, mem := filepath.Join(cgroupMount, "cpu", rel), filepath.Join(cgroupMount, "memory", rel)
		return num(readTrimmed(t, filepath.Join(cpu, "cpu.cfs_quota_us"))), num(readTrimmed(t, filepath.Join(cpu, "cpu.shares"))),
			num(readTrimmed(t, filepath.Join(mem, "memory.limit_in_bytes")))
	}
	dir := filepath.Join(cgroupMount, rel)
	max := strings.Fields(readTrimmed(t, filepath.Join(dir, "cpu.max")))
	weight := num(readTrimmed(t, filepath.Join(dir, "cpu.weight")))
	return num(max[0]), ((weight-1)*262142)/9999 + 2, num(readTrimmed(t, filepath.Join(dir, "memory.max")))
}

// runningContainer is the running container named name of the pod.
func runningContainer(t *testing.T, c *framework.Cluster, uid, name string) *runtimeapi.Container {
	t.Helper()
	for _, x := range podContainers(t, c, uid) {
		if x.Metadata.Name == name && x.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return x
		}
	}
	t.Fatalf("no running container %s", name)
	return nil
}

// runningID is the ID of the pod's running container name ("" when none)
// and every container of the pod the runtime has, to say what happened.
func runningID(t *testing.T, c *framework.Cluster, uid, name string) (string, string) {
	t.Helper()
	id, all := "", []string{}
	for _, x := range podContainers(t, c, uid) {
		all = append(all, fmt.Sprintf("%s#%d:%s:%.12s", x.Metadata.Name, x.Metadata.Attempt, x.State, x.Id))
		if x.Metadata.Name == name && x.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			id = x.Id
		}
	}
	return id, strings.Join(all, " ")
}

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func hasCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// resized reports whether the pod's resize is done: no resize condition,
// every container's status.resources as wanted.
func resized(want map[string]v1.ResourceRequirements) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		if hasCondition(p, v1.PodResizePending) != nil || hasCondition(p, v1.PodResizeInProgress) != nil {
			return false
		}
		for name, r := range want {
			cs := containerStatus(p, name)
			if cs == nil || cs.Resources == nil || cs.State.Running == nil {
				return false
			}
			for _, l := range []struct{ got, want v1.ResourceList }{{cs.Resources.Limits, r.Limits}, {cs.Resources.Requests, r.Requests}, {cs.AllocatedResources, r.Requests}} {
				for res, q := range l.want {
					if g, ok := l.got[res]; !ok || !g.Equal(q) {
						return false
					}
				}
			}
		}
		return true
	}
}

// TestClusterInPlaceResize resizes a running pod through the resize
// subresource, as kubectl patch --subresource resize does: a container
// whose resizePolicy is NotRequired gets its new CPU and memory in place
// (same container, restartCount 0; its cgroup and the pod's updated), one
// whose memory policy is RestartContainer is restarted with its new
// limit; status.containerStatuses[].resources and allocatedResources
// follow, the ResizeStarted and ResizeCompleted events are recorded. A
// resize that does not fit next to another pod is Deferred (condition
// PodResizePending, event ResizeDeferred, the allocation unchanged) until
// that pod is deleted. After a restart of nodelet nothing is resized or
// restarted again.
func TestClusterInPlaceResize(t *testing.T) {
	name := "e2e-resize"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "resize")
	ctx := context.Background()
	q := resource.MustParse
	rr := func(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
		return v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q(cpuReq), v1.ResourceMemory: q(memReq)},
			Limits:   v1.ResourceList{v1.ResourceCPU: q(cpuLim), v1.ResourceMemory: q(memLim)},
		}
	}
	const loop = "trap 'exit 0' TERM; while true; do sleep 0.2; done"
	pod := busyboxPod("rz", name, loop)
	pod.Spec.Containers[0].Resources = rr("100m", "200m", "32Mi", "64Mi")
	restart := pod.Spec.Containers[0]
	restart.Name = "r"
	restart.Resources = rr("50m", "100m", "16Mi", "32Mi")
	restart.ResizePolicy = []v1.ContainerResizePolicy{
		{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
		{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer},
	}
	pod.Spec.Containers = append(pod.Spec.Containers, restart)
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "rz", 60*time.Second, "Ready", podReady)
	uid := string(p.UID)
	podRel := "kubepods/burstable/pod" + uid
	before := runningContainer(t, c, uid, "c").Id

	patch := func(containers map[string]v1.ResourceRequirements) {
		t.Helper()
		// In the pod's order: a patch listing them in another order
		// reorders the containers, which the API server forbids.
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(containers)) {
			r := containers[name]
			parts = append(parts, fmt.Sprintf(`{"name":%q,"resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}`,
				name, r.Requests.Cpu().String(), r.Requests.Memory().String(), r.Limits.Cpu().String(), r.Limits.Memory().String()))
		}
		body := `{"spec":{"containers":[` + strings.Join(parts, ",") + `]}}`
		if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "rz", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatal(err)
		}
	}

	// Up: c in place, r restarted for its memory.
	up := map[string]v1.ResourceRequirements{"c": rr("200m", "400m", "32Mi", "96Mi"), "r": rr("50m", "100m", "16Mi", "48Mi")}
	start := time.Now()
	patch(up)
	p = waitPod(t, c, ns, "rz", 60*time.Second, "resized up", resized(up))
	t.Logf("resized up in %v", time.Since(start).Round(10*time.Millisecond))
	if id, all := runningID(t, c, uid, "c"); containerStatus(p, "c").RestartCount != 0 || id != before {
		t.Fatalf("c restarted (restartCount %d) for a NotRequired resize; containers: %s", containerStatus(p, "c").RestartCount, all)
	}
	if cs := containerStatus(p, "r"); cs.RestartCount != 1 {
		t.Errorf("r restartCount %d, want 1 (its memory resizePolicy is RestartContainer)", cs.RestartCount)
	}
	if p.Status.ObservedGeneration != p.Generation {
		t.Errorf("observedGeneration %d, generation %d", p.Status.ObservedGeneration, p.Generation)
	}
	// The pod cgroup: the sum of the limits; c's own cgroup: its limits.
	quota, shares, mem := cgroupLimits(t, podRel)
	if quota != 50000 || shares != 256 || mem != 144<<20 {
		t.Errorf("pod cgroup: quota %d shares %d memory %d, want 50000 256 %d", quota, shares, mem, 144<<20)
	}
	ctrRel := strings.TrimPrefix(procCgroup(t, containerPid(t, c, before), "memory"), "/")
	if !cgroupV1() {
		ctrRel = strings.TrimPrefix(readTrimmed(t, fmt.Sprintf("/proc/%d/cgroup", containerPid(t, c, before)))[3:], "/")
	}
	quota, shares, mem = cgroupLimits(t, ctrRel)
	if quota != 40000 || shares != 204 || mem != 96<<20 {
		t.Errorf("c's cgroup %s: quota %d shares %d memory %d, want 40000 204 %d", ctrRel, quota, shares, mem, 96<<20)
	}
	reasons := func() []string {
		evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=rz"})
		var out []string
		for _, e := range evs.Items {
			out = append(out, e.Reason)
		}
		return out
	}
	for _, r := range []string{"ResizeStarted", "ResizeCompleted"} {
		if !slices.Contains(reasons(), r) {
			t.Errorf("no %s event (got %v)", r, reasons())
		}
	}

	// Down, in place.
	down := map[string]v1.ResourceRequirements{"c": rr("100m", "100m", "32Mi", "48Mi")}
	patch(down)
	waitPod(t, c, ns, "rz", 60*time.Second, "resized down", resized(down))
	if quota, _, mem = cgroupLimits(t, ctrRel); quota != 10000 || mem != 48<<20 {
		t.Errorf("c's cgroup after the decrease: quota %d memory %d", quota, mem)
	}

	// Deferred: another pod holds half the node's CPU; c asks for more
	// than is left.
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Status.Allocatable.Cpu().MilliValue()
	hog := busyboxPod("hog", name, loop)
	hog.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(alloc/2, resource.DecimalSI)}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "hog", 60*time.Second, "Ready", podReady)
	big := *resource.NewMilliQuantity(alloc/2+100, resource.DecimalSI)
	deferred := map[string]v1.ResourceRequirements{"c": {
		Requests: v1.ResourceList{v1.ResourceCPU: big, v1.ResourceMemory: q("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: big, v1.ResourceMemory: q("48Mi")},
	}}
	patch(deferred)
	p = waitPod(t, c, ns, "rz", 30*time.Second, "PodResizePending Deferred", func(p *v1.Pod) bool {
		cond := hasCondition(p, v1.PodResizePending)
		return cond != nil && cond.Reason == v1.PodReasonDeferred
	})
	cond := hasCondition(p, v1.PodResizePending)
	if !strings.Contains(cond.Message, "Node didn't have enough resource: cpu") || cond.ObservedGeneration != p.Generation {
		t.Errorf("pending condition %+v (generation %d)", cond, p.Generation)
	}
	if a := containerStatus(p, "c").AllocatedResources.Cpu(); a.MilliValue() != 100 {
		t.Errorf("allocated cpu %s while deferred, want 100m", a)
	}
	if !slices.Contains(reasons(), "ResizeDeferred") {
		t.Errorf("no ResizeDeferred event (got %v)", reasons())
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "hog", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitPod(t, c, ns, "rz", 60*time.Second, "resized once the other pod is gone", resized(deferred))
	t.Logf("deferred resize done %v after the other pod's deletion", time.Since(start).Round(10*time.Millisecond))

	// A restart of nodelet neither repeats nor loses the resize.
	n.Kill()
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool { return c.NodeReady(t, name) == v1.ConditionTrue }, "node Ready again")
	time.Sleep(3 * time.Second)
	p = waitPod(t, c, ns, "rz", 30*time.Second, "still resized", resized(deferred))
	if id, all := runningID(t, c, uid, "c"); containerStatus(p, "c").RestartCount != 0 || id != before {
		t.Errorf("c restarted after nodelet's restart (restartCount %d); containers: %s", containerStatus(p, "c").RestartCount, all)
	}
	if cs := containerStatus(p, "r"); cs.RestartCount != 1 {
		t.Errorf("r restartCount %d after nodelet's restart, want 1", cs.RestartCount)
	}
	if quota, _, _ = cgroupLimits(t, ctrRel); quota != (alloc/2+100)*100 {
		t.Errorf("c's quota %d after nodelet's restart, want %d", quota, (alloc/2+100)*100)
	}
}
