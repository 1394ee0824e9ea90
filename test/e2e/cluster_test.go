package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

var (
	clusterNode = framework.ClusterNode
	busyboxPod  = framework.BusyboxPod
	podReady    = framework.PodReady
)

func waitPod(t *testing.T, c *framework.Cluster, ns, name string, timeout time.Duration, what string, ok func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	framework.Eventually(t, timeout, 200*time.Millisecond, func() bool {
		got, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		p = got
		return ok(p)
	}, "pod %s/%s: %s", ns, name, what)
	return p
}

func TestClusterNodeRegistersWithStatusAndLease(t *testing.T) {
	name := "e2e-node-status"
	c, _ := clusterNode(t, name, `maxPods: 42
kubeReserved: {cpu: 100m, memory: 100Mi}
systemReserved: {memory: 50Mi}
evictionHard: {memory.available: 200Mi, nodefs.available: 10%}
`)
	ctx := context.Background()
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if node.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], want)
		}
	}
	if len(node.Status.Addresses) == 0 || node.Status.Addresses[0].Type != v1.NodeInternalIP || node.Status.Addresses[0].Address != c.NodeIP {
		t.Errorf("addresses %v, want InternalIP %s first", node.Status.Addresses, c.NodeIP)
	}
	capa, alloc := node.Status.Capacity, node.Status.Allocatable
	if capa.Pods().Value() != 42 || alloc.Pods().Value() != 42 {
		t.Errorf("pods capacity/allocatable %v/%v, want 42", capa.Pods(), alloc.Pods())
	}
	wantMem := capa.Memory().Value() - (100+50+200)*1024*1024
	if alloc.Memory().Value() != wantMem {
		t.Errorf("allocatable memory %d, want capacity %d - 350Mi = %d", alloc.Memory().Value(), capa.Memory().Value(), wantMem)
	}
	if got, want := alloc.Cpu().MilliValue(), capa.Cpu().MilliValue()-100; got != want {
		t.Errorf("allocatable cpu %dm, want %dm", got, want)
	}
	storage := capa.StorageEphemeral().Value()
	if got, want := alloc.StorageEphemeral().Value(), storage-storage/10; got < want-1 || got > want+1 {
		t.Errorf("allocatable ephemeral-storage %d, want %d (90%%)", got, want)
	}
	info := node.Status.NodeInfo
	if info.BootID == "" || info.KernelVersion == "" || info.OSImage == "" || info.MachineID == "" ||
		!strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://") || info.KubeletVersion == "" {
		t.Errorf("nodeInfo incomplete: %+v", info)
	}
	conds := map[v1.NodeConditionType]v1.ConditionStatus{}
	for _, cond := range node.Status.Conditions {
		conds[cond.Type] = cond.Status
	}
	for typ, want := range map[v1.NodeConditionType]v1.ConditionStatus{
		v1.NodeReady: v1.ConditionTrue, v1.NodeMemoryPressure: v1.ConditionFalse, v1.NodeDiskPressure: v1.ConditionFalse, v1.NodePIDPressure: v1.ConditionFalse,
	} {
		if conds[typ] != want {
			t.Errorf("condition %s = %q, want %q", typ, conds[typ], want)
		}
	}
	if len(node.Status.Images) == 0 {
		t.Error("no images reported")
	}

	// The lease exists, is held by the node, owned by it, and is renewed.
	// The lease controller starts once the node is registered, beside the
	// first status update, so Ready may be seen a moment before it exists.
	var lease *coordinationv1.Lease
	framework.Eventually(t, 10*time.Second, 100*time.Millisecond, func() bool {
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		lease = l
		return err == nil
	}, "the node's lease created")
	if *lease.Spec.HolderIdentity != name || *lease.Spec.LeaseDurationSeconds != 20 {
		t.Errorf("lease holder %q duration %d", *lease.Spec.HolderIdentity, *lease.Spec.LeaseDurationSeconds)
	}
	first := lease.Spec.RenewTime.Time
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first) && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == node.UID
	}, "the lease renewed and owned by the node")
}

func TestClusterDeploymentRunsReadyAndDeletes(t *testing.T) {
	name := "e2e-deploy"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "deploy")
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](5),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": name},
					TerminationGracePeriodSeconds: ptr.To[int64](20),
					Containers: []v1.Container{{Name: "web", Image: busybox,
						Command: []string{"sh", "-c", "trap 'exit 0' TERM; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; while true; do sleep 0.2; done"}}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []v1.Pod
	framework.Eventually(t, 90*time.Second, 500*time.Millisecond, func() bool {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := 0
		for _, p := range list.Items {
			if p.Status.Phase == v1.PodRunning && podReady(&p) && p.DeletionTimestamp == nil {
				ready++
			}
		}
		pods = list.Items
		return ready == 5
	}, "5 Ready replicas")

	ips := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != name {
			t.Errorf("pod %s on node %q", p.Name, p.Spec.NodeName)
		}
		if !strings.HasPrefix(p.Status.PodIP, "10.88.") || ips[p.Status.PodIP] {
			t.Errorf("pod %s has IP %q (duplicate or off the CNI subnet)", p.Name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = true
		// The IP is the sandbox's.
		boxes, _ := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
		if len(boxes) != 1 {
			t.Errorf("pod %s has %d sandboxes", p.Name, len(boxes))
			continue
		}
		st, _ := c.Runtime.PodSandboxStatus(ctx, boxes[0].Id, false)
		if st.GetStatus().GetNetwork().GetIp() != p.Status.PodIP {
			t.Errorf("pod %s status IP %s, sandbox IP %s", p.Name, p.Status.PodIP, st.GetStatus().GetNetwork().GetIp())
		}
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || !strings.HasPrefix(cs[0].ContainerID, "containerd://") ||
			cs[0].ImageID == "" || p.Status.StartTime == nil || p.Status.QOSClass != v1.PodQOSBestEffort || p.Status.HostIP != c.NodeIP {
			t.Errorf("pod %s status incomplete: %+v", p.Name, p.Status)
		}
		conds := map[v1.PodConditionType]v1.ConditionStatus{}
		for _, cond := range p.Status.Conditions {
			conds[cond.Type] = cond.Status
		}
		for _, typ := range []v1.PodConditionType{v1.PodScheduled, v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
			if conds[typ] != v1.ConditionTrue {
				t.Errorf("pod %s condition %s = %q", p.Name, typ, conds[typ])
			}
		}
	}

	// kubectl delete: the pod's container exits on SIGTERM, so it is gone
	// well inside its 20 s grace period, and its sandbox too.
	victim := pods[0]
	start := time.Now()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the deleted pod gone from the API")
	took := time.Since(start)
	t.Logf("graceful deletion took %v", took)
	if took > 10*time.Second {
		t.Errorf("deletion took %v for a container that exits on SIGTERM", took)
	}
	framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
		boxes, _ := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(victim.UID)}})
		return len(boxes) == 0
	}, "the deleted pod's sandbox removed")
}

func TestClusterCrashLoopAndOutOfCPU(t *testing.T) {
	name := "e2e-crash-cpu"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "crash")
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod("crash", name, "echo boom; exit 7"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noimg := busyboxPod("noimage", name, "true")
	noimg.Spec.Containers[0].Image = "registry.example/nothing/here:1"
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, noimg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	big := busyboxPod("big", name, "sleep 3600")
	big.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000")}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "big", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "OutOfcpu" || !strings.Contains(p.Status.Message, "Node didn't have enough resource: cpu, requested: 1000000") {
		t.Errorf("rejection: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if boxes := c.Sandboxes(t, "big"); len(boxes) != 0 {
		t.Errorf("the rejected pod got a sandbox")
	}

	p = waitPod(t, c, ns, "crash", 60*time.Second, "CrashLoopBackOff with 2 restarts", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 2 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CrashLoopBackOff"
	})
	cs := p.Status.ContainerStatuses[0]
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 7 || lt.Reason != "Error" {
		t.Errorf("lastState %+v, want terminated with exit code 7", cs.LastTerminationState)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("crash-looping pod phase %s, want Running", p.Status.Phase)
	}
	// Restart counts never go backwards.
	last := cs.RestartCount
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		if rc := c.Pod(t, ns, "crash").Status.ContainerStatuses[0].RestartCount; rc < last {
			t.Fatalf("restartCount went from %d to %d", last, rc)
		} else {
			last = rc
		}
	}
	// A pod whose image cannot be pulled says so in its status.
	waitPod(t, c, ns, "noimage", 30*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil &&
			(cs[0].State.Waiting.Reason == "ErrImagePull" || cs[0].State.Waiting.Reason == "ImagePullBackOff") &&
			strings.Contains(cs[0].State.Waiting.Message, "registry.example/nothing/here:1")
	})
	evs, _ := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		reasons[e.Reason] = true
	}
	for _, r := range []string{"Pulled", "Created", "Started", "BackOff", "OutOfcpu", "Failed"} {
		if !reasons[r] {
			t.Errorf("no %s event (got %v)", r, reasons)
		}
	}
}

// TestCrashLoopBackOffMax: crashLoopBackOff.maxContainerRestartPeriod
// (KubeletCrashLoopBackOffMax) caps the restart back-off: with 2 s a
// crashing container restarts about every 2 s (upstream's default, 10 s
// doubling, allows two restarts in the first 30 s), still reported as
// CrashLoopBackOff between its runs.
func TestCrashLoopBackOffMax(t *testing.T) {
	name := "e2e-backoff-max"
	c, _ := clusterNode(t, name, "crashLoopBackOff:\n  maxContainerRestartPeriod: 2s\n")
	ns := c.Namespace(t, "backoff")
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), busyboxPod("crash", name, "exit 1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitPod(t, c, ns, "crash", 30*time.Second, "6 restarts within 30 s", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 6
	})
	t.Logf("6 restarts %v after the pod was created", time.Since(start).Round(100*time.Millisecond))
	waitPod(t, c, ns, "crash", 10*time.Second, "CrashLoopBackOff between restarts", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CrashLoopBackOff" &&
			strings.Contains(cs[0].State.Waiting.Message, "back-off 2s restarting failed container=c")
	})
}

func TestClusterMirrorPodsSurviveDeletion(t *testing.T) {
	name := "e2e-mirror"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	n.WriteManifest("static.yaml", podManifest("static", "  terminationGracePeriodSeconds: 2\n", container("c", "sleep 3600")))
	n.Start()
	pod := n.PodName("static")
	ctx := context.Background()
	mp := waitPod(t, c, "default", pod, 60*time.Second, "mirror pod Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	if mp.Annotations["kubernetes.io/config.mirror"] == "" || mp.Annotations["kubernetes.io/config.mirror"] != mp.Annotations["kubernetes.io/config.hash"] {
		t.Errorf("mirror annotations: %v", mp.Annotations)
	}
	if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].Kind != "Node" || mp.OwnerReferences[0].Name != name {
		t.Errorf("mirror owner references: %v", mp.OwnerReferences)
	}
	ctr := waitRunning(t, c.Stack, pod, "c", 30*time.Second)

	if err := c.Client.CoreV1().Pods("default").Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, "default", pod, 30*time.Second, "mirror pod recreated Running", func(p *v1.Pod) bool {
		return p.UID != mp.UID && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodRunning
	})
	if now := c.RunningContainer(t, pod, "c"); now == nil || now.Id != ctr.Id {
		t.Errorf("deleting the mirror pod restarted the static pod's container")
	}

	// Removing the manifest removes the mirror pod.
	n.RemoveManifest("static.yaml")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "mirror pod deleted with its manifest")
}

// TestClusterStaticPodManifestRecreated: upstream's node e2e "MirrorPod
// should successfully recreate when file is removed and recreated". The
// manifest is removed and at once written again in place (same content,
// so the same pod UID) while the first pod is still terminating: the pod
// runs again, its container's restartCount 1, and stays running.
func TestClusterStaticPodManifestRecreated(t *testing.T) {
	name := "e2e-recreate"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	manifest := podManifest("again", "", container("c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"))
	path := filepath.Join(n.ManifestDir, "again.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()
	pod := n.PodName("again")
	mp := waitPod(t, c, "default", pod, 60*time.Second, "mirror pod Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	again := waitPod(t, c, "default", pod, 120*time.Second, "mirror pod Running with restartCount 1", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == v1.PodRunning && len(cs) == 1 && cs[0].State.Running != nil && cs[0].RestartCount == 1
	})
	t.Logf("running again %v after the manifest was written back (mirror pod UID %s, was %s)", time.Since(start).Round(100*time.Millisecond), again.UID, mp.UID)
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		p := c.Pod(t, "default", pod)
		if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("the pod did not stay running: phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
	}
	n.RemoveManifest("again.yaml")
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "mirror pod deleted with its manifest")
}

func TestClusterNodeUnknownThenBackWithoutRestarts(t *testing.T) {
	name := "e2e-restart"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "restart")
	ctx := context.Background()
	for _, pn := range []string{"keep", "gone"} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod(pn, name, "trap 'exit 0' TERM; while true; do sleep 0.2; done"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	keep := waitPod(t, c, ns, "keep", 60*time.Second, "Ready", podReady)
	gone := waitPod(t, c, ns, "gone", 60*time.Second, "Ready", podReady)
	before := keep.Status.ContainerStatuses[0].ContainerID

	n.Stop()
	start := time.Now()
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionUnknown
	}, "node Unknown after nodelet stopped")
	t.Logf("node Unknown %v after nodelet stopped", time.Since(start).Round(time.Second))
	// While nodelet is down, a pod is deleted for good.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}

	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node Ready again")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		boxes, _ := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(gone.UID)}})
		return len(boxes) == 0
	}, "the pod deleted while nodelet was down removed from the runtime")
	time.Sleep(3 * time.Second)
	p := c.Pod(t, ns, "keep")
	cs := p.Status.ContainerStatuses[0]
	if cs.ContainerID != before || cs.RestartCount != 0 || !podReady(p) {
		t.Errorf("container after restart: id %s (before %s), restarts %d, ready %v", cs.ContainerID, before, cs.RestartCount, podReady(p))
	}
	if fmt.Sprint(p.Status.StartTime) != fmt.Sprint(keep.Status.StartTime) {
		t.Errorf("startTime changed across the restart: %v -> %v", keep.Status.StartTime, p.Status.StartTime)
	}
}

// TestClusterSurvivesAPIServerOutage stops kube-apiserver under a running
// node: the pods keep running untouched, nodelet stays up and healthy, and
// when the API server is back the node reports Ready again and pod status
// changes made meanwhile reach the API. (Last in the file: it restarts the
// shared API server.)
func TestClusterSurvivesAPIServerOutage(t *testing.T) {
	name := "e2e-outage"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "outage")
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod("steady", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, busyboxPod("finisher", name, "trap 'exit 0' TERM; sleep 25; exit 3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	steady := waitPod(t, c, ns, "steady", 60*time.Second, "Ready", podReady)
	waitPod(t, c, ns, "finisher", 60*time.Second, "Ready", podReady)
	before := steady.Status.ContainerStatuses[0].ContainerID

	c.StopAPIServer(t)
	// 25 s without an API server: the finisher's container exits meanwhile.
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		if n.Pid() == 0 {
			t.Fatal("nodelet exited while the API server was down")
		}
		if code, _, err := n.Healthz(); err != nil || code != 200 {
			t.Fatalf("nodelet healthz %d %v while the API server was down", code, err)
		}
		time.Sleep(time.Second)
	}
	if c.RunningContainer(t, "steady", "c") == nil {
		t.Fatal("the steady pod's container stopped during the outage")
	}
	c.StartAPIServer(t)

	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node Ready after the outage")
	p := waitPod(t, c, ns, "finisher", 60*time.Second, "restart made during the outage reported", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 1
	})
	if lt := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 {
		t.Errorf("finisher lastState %+v, want exit code 3", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	if got := c.Pod(t, ns, "steady").Status.ContainerStatuses[0]; got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("steady container changed across the outage: %s -> %s, restarts %d", before, got.ContainerID, got.RestartCount)
	}
}

// TestClusterExternalCloudProvider: with --cloud-provider=external the node
// registers with upstream's uninitialized taint and its --node-ip in the
// provided-node-ip annotation (for the cloud controller manager); addresses
// a cloud controller manager sets afterwards are kept.
func TestClusterExternalCloudProvider(t *testing.T) {
	name := "e2e-ccm"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	n.ExtraArgs = append(n.ExtraArgs, "--cloud-provider=external")
	n.Start()
	ctx := context.Background()
	var node *v1.Node
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		var err error
		node, err = c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)
	tainted := false
	for _, taint := range node.Spec.Taints {
		tainted = tainted || taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" && taint.Value == "true" && taint.Effect == v1.TaintEffectNoSchedule
	}
	if !tainted {
		t.Errorf("taints %v, want node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", node.Spec.Taints)
	}
	if got := node.Annotations["alpha.kubernetes.io/provided-node-ip"]; got != c.NodeIP {
		t.Errorf("provided-node-ip annotation %q, want %q", got, c.NodeIP)
	}
	// A cloud controller manager's addresses stay. (nodelet updates the
	// status meanwhile: retried on conflict, as a controller does.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: c.NodeIP}, {Type: v1.NodeExternalIP, Address: "192.0.2.10"}}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Restarted, nodelet reports its status in full: the addresses stay.
	n.Stop()
	restarted := metav1.NewTime(time.Now().Truncate(time.Second))
	n.Start()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
		var err error
		if node, err = c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == v1.NodeReady {
				return cond.Status == v1.ConditionTrue && !cond.LastHeartbeatTime.Before(&restarted)
			}
		}
		return false
	}, "node %s reported Ready after the restart", name)
	external := false
	for _, a := range node.Status.Addresses {
		external = external || a.Type == v1.NodeExternalIP && a.Address == "192.0.2.10"
	}
	if !external {
		t.Errorf("the cloud controller manager's ExternalIP was overwritten: %v", node.Status.Addresses)
	}
}

// TestClusterRejectedPodsDeletedAfterRestart is upstream's regression test
// for issue 118472 (e2e_node restart_test): pods the node refuses after a
// restart (a nodeSelector it does not match), deleted in the API while
// nodelet was down, are finished and deleted for good: one created and
// deleted during the downtime, one admitted and running before it (its
// node label removed meanwhile), whose container is stopped.
func TestClusterRejectedPodsDeletedAfterRestart(t *testing.T) {
	name := "e2e-rejected"
	c, n := clusterNode(t, name, "")
	ns := c.Namespace(t, "rejected")
	ctx := context.Background()
	label := func(value *string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"e2e-admission":null}}}`
		if value != nil {
			patch = `{"metadata":{"labels":{"e2e-admission":"` + *value + `"}}}`
		}
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	yes := "yes"
	label(&yes)
	running := busyboxPod("running", name, "trap 'exit 0' TERM; while true; do sleep 0.2; done")
	running.Spec.NodeSelector = map[string]string{"e2e-admission": "yes"}
	running.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, running, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "running", 60*time.Second, "Ready", podReady)

	n.Stop()
	label(nil)
	created := busyboxPod("created", name, "sleep 3600")
	created.Spec.NodeSelector = map[string]string{"this-label": "does-not-exist-on-any-nodes"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, created, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, pn := range []string{"created", "running"} {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pn, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
			t.Fatal(err)
		}
	}
	n.Start()
	start := time.Now()
	for _, pn := range []string{"created", "running"} {
		framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, pn, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "pod %s deleted after nodelet restarted", pn)
		t.Logf("%s: deleted %v after the start", pn, time.Since(start).Round(100*time.Millisecond))
	}
	boxes, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": ns}})
	if err != nil || len(boxes) != 0 {
		t.Errorf("ready sandboxes of the namespace left: %d (%v)", len(boxes), err)
	}
}
