package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// specMems is the cpuset.mems of a container's OCI spec as the runtime
// created it ("" when unset).
func specMems(t *testing.T, c *framework.Cluster, id string) string {
	t.Helper()
	st, err := c.Runtime.ContainerStatus(context.Background(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		RuntimeSpec struct {
			Linux struct {
				Resources struct {
					CPU *struct {
						Mems string `json:"mems"`
					} `json:"cpu"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil {
		t.Fatalf("the runtime's info of %s: %v", id, err)
	}
	if cpu := info.RuntimeSpec.Linux.Resources.CPU; cpu != nil {
		return cpu.Mems
	}
	return ""
}

// TestClusterMemoryManagerStatic: memoryManagerPolicy Static on the
// cluster (this host has one NUMA node; four 2Mi huge pages are reserved
// for the test). With reservedMemory equal to kubeReserved + the hard
// eviction threshold, a Guaranteed pod's container is created pinned to
// NUMA node 0 (cpuset.mems in its OCI spec) with its huge pages in a
// HugePages emptyDir (hugetlbfs), a Burstable pod's is not pinned; the
// pod-resources API reports the blocks and the node's allocatable memory
// and huge pages; a Guaranteed pod asking more
// than the node has is refused with upstream's words; a restart of
// nodelet keeps the assignment (memory_manager_state, upstream's format);
// the deleted pod's memory is given back; a reservedMemory that does not
// add up refuses to start, naming the sums as upstream.
func TestClusterMemoryManagerStatic(t *testing.T) {
	// Four 2Mi huge pages on the machine, before nodelet reads it.
	const nrHugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	before := readTrimmed(t, nrHugepages)
	if err := os.WriteFile(nrHugepages, []byte("4"), 0o644); err != nil || readTrimmed(t, nrHugepages) != "4" {
		t.Fatalf("reserving four 2Mi huge pages: %v (have %s)", err, readTrimmed(t, nrHugepages))
	}
	t.Cleanup(func() { _ = os.WriteFile(nrHugepages, []byte(before), 0o644) })
	name := "e2e-memorymanager"
	c, n := clusterNode(t, name, "memoryManagerPolicy: Static\nkubeReserved: {memory: 412Mi}\nreservedMemory: [{numaNode: 0, limits: {memory: 512Mi}}]\n")
	ns := c.Namespace(t, "memorymanager")
	ctx := context.Background()
	const loop = "trap 'exit 0' TERM; while true; do sleep 1; done"
	create := func(podName, memory string, guaranteed bool) {
		t.Helper()
		p := busyboxPod(podName, name, loop)
		r := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse(memory)}
		if podName == "pinned" {
			// Huge pages too, mounted as upstream's memory manager test does.
			r["hugepages-2Mi"] = resource.MustParse("2Mi")
			p.Spec.Volumes = []v1.Volume{{Name: "hugepages", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "hugepages", MountPath: "/hugepages"}}
		}
		if guaranteed {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r}
		} else {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	containerID := func(podName string) string {
		t.Helper()
		p := waitPod(t, c, ns, podName, 60*time.Second, "Ready", podReady)
		return runningContainer(t, c, string(p.UID), "c").Id
	}

	create("pinned", "64Mi", true)
	create("free", "64Mi", false)
	pinned, free := containerID("pinned"), containerID("free")
	if got := specMems(t, c, pinned); got != "0" {
		t.Errorf("guaranteed pod's cpuset.mems %q, want 0", got)
	}
	if got := specMems(t, c, free); got != "" {
		t.Errorf("burstable pod's cpuset.mems %q, want none", got)
	}
	if out, err := c.KubectlOut(t, 30*time.Second, "exec", "-n", ns, "pinned", "--", "grep", " /hugepages ", "/proc/mounts"); err != nil || !strings.Contains(out, "hugetlbfs") || !strings.Contains(out, "pagesize=2M") {
		t.Errorf("the HugePages emptyDir in the container: %q %v", out, err)
	}

	// More than the node has: refused before the node's predicates.
	create("huge", "512Gi", true)
	p := waitPod(t, c, ns, "huge", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "UnexpectedAdmissionError" || p.Status.Message !=
		"Pod was rejected: Allocate failed due to [memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available, which is unexpected" {
		t.Errorf("huge guaranteed pod: %s %q", p.Status.Reason, p.Status.Message)
	}

	// The pod-resources API: the block and the node's allocatable memory.
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.RootDir, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	got, err := cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: ns, PodName: "pinned"})
	if err != nil || len(got.PodResources.Containers) != 1 || len(got.PodResources.Containers[0].Memory) != 2 {
		t.Fatalf("pod-resources Get: %v %v", got, err)
	}
	for i, want := range []struct {
		typ  string
		size uint64
	}{{"hugepages-2Mi", 2 << 20}, {"memory", 64 << 20}} {
		if m := got.PodResources.Containers[0].Memory[i]; m.MemoryType != want.typ || m.Size != want.size || len(m.Topology.Nodes) != 1 || m.Topology.Nodes[0].ID != 0 {
			t.Errorf("pod-resources memory %v, want %s %d on node 0", m, want.typ, want.size)
		}
	}
	alloc, err := cl.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	var allocMem, allocHuge uint64
	for _, m := range alloc.GetMemory() {
		switch m.MemoryType {
		case "memory":
			allocMem = m.Size
		case "hugepages-2Mi":
			allocHuge = m.Size
		}
	}
	if err != nil || allocMem == 0 || allocMem%(1<<10) != 0 || allocHuge != 8<<20 {
		t.Errorf("pod-resources GetAllocatableResources memory: %v %v", alloc, err)
	}
	t.Logf("allocatable memory on NUMA node 0: %d MiB", allocMem>>20)

	// The checkpoint, upstream's format: the data section holds the
	// assignment.
	var cp struct {
		PolicyName string                                        `json:"policyName"`
		Entries    map[string]map[string][]struct{ Size uint64 } `json:"entries"`
		Data       string                                        `json:"data"`
	}
	raw, err := os.ReadFile(filepath.Join(n.RootDir, "memory_manager_state"))
	if err != nil || json.Unmarshal(raw, &cp) != nil || cp.PolicyName != "Static" || cp.Data == "" || len(cp.Entries) != 1 {
		t.Errorf("memory_manager_state %s: %v", raw, err)
	}

	// A restart keeps the assignment: a container recreated is pinned.
	n.Kill()
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool { return c.NodeReady(t, name) == v1.ConditionTrue }, "node Ready again")
	if err := c.Runtime.StopContainer(ctx, pinned, 0); err != nil {
		t.Fatal(err)
	}
	var again string
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		if id, _ := runningID(t, c, string(c.Pod(t, ns, "pinned").UID), "c"); id != "" && id != pinned {
			again = id
		}
		return again != ""
	}, "the guaranteed pod's container restarted")
	if got := specMems(t, c, again); got != "0" {
		t.Errorf("after a restart of nodelet, the recreated container's cpuset.mems %q, want 0", got)
	}

	// The pod goes: its memory is given back.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "pinned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		raw, _ := os.ReadFile(filepath.Join(n.RootDir, "memory_manager_state"))
		var now struct {
			Entries map[string]any `json:"entries"`
		}
		return json.Unmarshal(raw, &now) == nil && len(now.Entries) == 0
	}, "the deleted pod's memory given back")

	// A reservation that does not add up refuses to start.
	n.Stop()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet stopped")
	n.ExtraArgs = append(n.ExtraArgs, "--reserved-memory", "0:memory=256Mi")
	n.Start()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet refusing to start")
	if log := n.Log(); !strings.Contains(log, `the total amount \"256Mi\" of type \"memory\" is not equal to the value \"512Mi\" determined by Node Allocatable feature`) {
		t.Errorf("nodelet with a reservation that does not add up: %s", log[max(0, len(log)-2000):])
	}
}
