package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// cpusAllowed is the CPU list a process may run on (its effective
// cpuset, cgroup v1 or v2).
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	for _, line := range strings.Split(readTrimmed(t, fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for pid %d", pid)
	return ""
}

// onlineCPUs are the host's online CPUs (these tests need two).
func onlineCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	all, err := cpuset.Parse(readTrimmed(t, "/sys/devices/system/cpu/online"))
	if err != nil || all.Size() < 2 {
		t.Fatalf("online CPUs %s: %v (the test needs two)", all, err)
	}
	return all
}

// TestClusterCPUManagerStatic: cpuManagerPolicy static on the cluster.
// With 500m reserved (CPU 0), a Guaranteed pod asking for one whole CPU
// runs on one other CPU alone; a Burstable pod running before it is moved
// off that CPU by the reconcile loop, one created after starts off it; on
// a 2-CPU node (CI's) a second Guaranteed pod is refused
// (UnexpectedAdmissionError, upstream's words); the pod-resources API
// reports the CPU; a restart of nodelet
// keeps the assignment (cpu_manager_state, upstream's format); once the
// Guaranteed pod is deleted the shared pool is every CPU again.
func TestClusterCPUManagerStatic(t *testing.T) {
	all := onlineCPUs(t)
	name := "e2e-cpumanager"
	c, n := clusterNode(t, name, "cpuManagerPolicy: static\ncpuManagerReconcilePeriod: 1s\nkubeReserved: {cpu: 500m}\n")
	ns := c.Namespace(t, "cpumanager")
	ctx := context.Background()
	const loop = "trap 'exit 0' TERM; while true; do sleep 1; done"
	create := func(podName string, guaranteed bool) string {
		t.Helper()
		p := busyboxPod(podName, name, loop)
		r := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
		if guaranteed {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r}
		} else {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return podName
	}
	pidOf := func(podName string) int {
		t.Helper()
		p := waitPod(t, c, ns, podName, 60*time.Second, "Ready", podReady)
		return containerPid(t, c, runningContainer(t, c, string(p.UID), "c").Id)
	}
	waitCPUs := func(what string, pid int, want string) {
		t.Helper()
		framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool { return cpusAllowed(t, pid) == want },
			"%s on CPUs %s (has %s)", what, want, cpusAllowed(t, pid))
	}

	early := pidOf(create("early", false))
	if got := cpusAllowed(t, early); got != all.String() {
		t.Errorf("burstable pod before any exclusive allocation on %s, want %s", got, all)
	}
	start := time.Now()
	pinned := pidOf(create("pinned", true))
	mine, err := cpuset.Parse(cpusAllowed(t, pinned))
	if err != nil || mine.Size() != 1 || mine.Contains(0) {
		t.Fatalf("guaranteed pod on %s (%v), want one CPU alone, not the reserved 0", mine, err)
	}
	shared := all.Difference(mine).String()
	waitCPUs("the burstable pod (reconciled)", early, shared)
	t.Logf("shared pool shrunk for the running burstable pod %v after the guaranteed pod's creation", time.Since(start).Round(100*time.Millisecond))
	if got := cpusAllowed(t, pidOf(create("late", false))); got != shared {
		t.Errorf("burstable pod created after on %s, want %s", got, shared)
	}
	if all.Size() == 2 {
		create("second", true)
		p := waitPod(t, c, ns, "second", 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "UnexpectedAdmissionError" ||
			!strings.HasSuffix(p.Status.Message, "Allocate failed due to not enough cpus available to satisfy request: requested=1, available=0, which is unexpected") {
			t.Errorf("second guaranteed pod: %s %q", p.Status.Reason, p.Status.Message)
		}
	}

	// The pod-resources API: the exclusive CPU, and the allocatable ones.
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.RootDir, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	got, err := cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: ns, PodName: "pinned"})
	if err != nil || len(got.PodResources.Containers) != 1 || fmt.Sprint(got.PodResources.Containers[0].CpuIds) != fmt.Sprint(mine.List()) {
		t.Errorf("pod-resources Get: %v %v", got, err)
	}
	alloc, err := cl.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || fmt.Sprint(alloc.CpuIds) != fmt.Sprint(all.Difference(cpuset.New(0)).List()) {
		t.Errorf("pod-resources GetAllocatableResources: %v %v", alloc, err)
	}

	// The checkpoint, upstream's format: the data section holds the
	// assignment.
	var cp struct {
		PolicyName    string                       `json:"policyName"`
		DefaultCPUSet string                       `json:"defaultCpuSet"`
		Entries       map[string]map[string]string `json:"entries"`
		Data          string                       `json:"data"`
	}
	raw, err := os.ReadFile(filepath.Join(n.RootDir, "cpu_manager_state"))
	if err != nil || json.Unmarshal(raw, &cp) != nil || cp.PolicyName != "static" || cp.DefaultCPUSet != shared || cp.Data == "" {
		t.Errorf("cpu_manager_state %s: %v", raw, err)
	}

	// A restart of nodelet keeps the assignment and moves nothing.
	n.Kill()
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool { return c.NodeReady(t, name) == v1.ConditionTrue }, "node Ready again")
	time.Sleep(3 * time.Second)
	if a, b := cpusAllowed(t, pinned), cpusAllowed(t, early); a != mine.String() || b != shared {
		t.Errorf("after a restart: guaranteed on %s, burstable on %s", a, b)
	}

	// The guaranteed pod goes: its CPU returns to the shared pool.
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "pinned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCPUs("the burstable pod after the guaranteed pod's deletion", early, all.String())
}

// TestClusterCPUManagerOptions: the static policy with
// prefer-align-cpus-by-uncorecache and strict-cpu-reservation
// (reservedSystemCPUs 0): a Guaranteed pod asking one CPU runs on one
// CPU other than 0, and /metrics counts it aligned at the uncore cache
// (upstream's container_aligned_compute_resources_count series, the
// physical_cpu ones present at zero); distribute-cpus-across-numa needs
// the beta gate and refuses to start without it; align-by-socket (alpha)
// with topologyManagerPolicy single-numa-node refuses to start, upstream's
// message.
func TestClusterCPUManagerOptions(t *testing.T) {
	onlineCPUs(t)
	name := "e2e-cpumanager-options"
	c, n := clusterNode(t, name, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"+
		"cpuManagerPolicyOptions: {prefer-align-cpus-by-uncorecache: \"true\", strict-cpu-reservation: \"true\"}\n")
	ns := c.Namespace(t, "cpumanager-options")
	p := busyboxPod("pinned", name, "trap 'exit 0' TERM; while true; do sleep 1; done")
	r := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: r, Limits: r}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, c, ns, "pinned", 60*time.Second, "Ready", podReady)
	mine, err := cpuset.Parse(cpusAllowed(t, containerPid(t, c, runningContainer(t, c, string(p.UID), "c").Id)))
	if err != nil || mine.Size() != 1 || mine.Contains(0) {
		t.Fatalf("guaranteed pod on %s (%v), want one CPU alone, not the reserved 0", mine, err)
	}
	fams := kubeletMetrics(t, c, n)
	if got := alignedCount(fams, "count", "uncore_cache"); got != 1 {
		t.Errorf("aligned count{boundary=uncore_cache} = %v, want 1", got)
	}
	if a, f := alignedCount(fams, "count", "physical_cpu"), alignedCount(fams, "failure_count", "physical_cpu"); a != 0 || f != 0 {
		t.Errorf("physical_cpu series: aligned %v, failures %v; want both present at 0", a, f)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpu-manager-policy-options", "distribute-cpus-across-numa=true", "--feature-gates", "CPUManagerPolicyBetaOptions=false"},
			`CPU Manager Policy Beta-level Options not enabled, but option "distribute-cpus-across-numa" provided`},
		{[]string{"--cpu-manager-policy-options", "align-by-socket=true", "--feature-gates", "CPUManagerPolicyAlphaOptions=true",
			"--topology-manager-policy", "single-numa-node"},
			"Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"},
	} {
		n.Stop()
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet stopped")
		n.ExtraArgs = tc.args
		n.Start()
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet refusing to start with %v", tc.args)
		if log := n.Log(); !strings.Contains(log, tc.want) {
			t.Errorf("nodelet with %v: %s", tc.args, log[max(0, len(log)-2000):])
		}
	}
}
