package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// priorityClass makes sure the cluster has the priority class name of
// value.
func priorityClass(t *testing.T, c *framework.Cluster, name string, value int32) {
	t.Helper()
	_, err := c.Client.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// evictedWith: the pod was evicted by the node with a message starting so.
func evictedWith(prefix string) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" && strings.HasPrefix(p.Status.Message, prefix)
	}
}

func disruptionTarget(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.DisruptionTarget {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// withEmptyDir mounts an emptyDir named data (sizeLimit when not empty) at
// /data in the pod's first container.
func withEmptyDir(p *v1.Pod, sizeLimit string) *v1.Pod {
	ed := &v1.EmptyDirVolumeSource{}
	if sizeLimit != "" {
		ed.SizeLimit = ptr.To(resource.MustParse(sizeLimit))
	}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: ed}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "data", MountPath: "/data"})
	return p
}

// startNode starts the nodelet and waits for its Node to be Ready.
func startNode(t *testing.T, c *framework.Cluster, n *framework.Nodelet) {
	t.Helper()
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, n.NodeName) == v1.ConditionTrue
	}, "node %s Ready", n.NodeName)
}

// createPods creates the pods in ns.
func createPods(t *testing.T, c *framework.Cluster, ns string, pods ...*v1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCondition waits for the node's condition typ to have status st.
func waitCondition(t *testing.T, c *framework.Cluster, node string, typ v1.NodeConditionType, st v1.ConditionStatus, what string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		cond := nodeCondition(t, c, node, typ)
		return cond != nil && cond.Status == st
	}, "%s %s: %s", typ, st, what)
}

// wantRunning fails the test unless pod name in ns runs.
func wantRunning(t *testing.T, c *framework.Cluster, ns, name string) {
	t.Helper()
	if got := c.Pod(t, ns, name); got.Status.Phase != v1.PodRunning {
		t.Errorf("%s is %s (%s: %s)", name, got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
}

// TestEvictionDiskPressure mirrors upstream's LocalStorageEviction and
// PriorityLocalStorageEvictionOrdering: nodelet's root directory is a
// 64 MiB tmpfs (so the images are on a filesystem of their own) and
// nodefs.available's hard threshold 50%. Two pods fill emptyDirs, 25 MiB
// at the default priority and 10 MiB at a higher one, a third writes
// nothing. The node comes under disk pressure; the low-priority filler is
// evicted first, alone, with grace 1 s: Failed, reason Evicted, upstream's
// message, the DisruptionTarget condition (TerminationByKubelet), the
// Evicted event with its annotations, kubelet_evictions counted. Its
// emptyDir goes with it, the pressure clears, the other two keep running
// and a new pod is admitted.
func TestEvictionDiskPressure(t *testing.T) {
	name := "e2e-evict-disk"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	tmpfsRoot(t, n, "size=64m")
	n.AppendConfig("evictionHard:\n  nodefs.available: \"50%\"\nevictionPressureTransitionPeriod: 5s\nvolumeStatsAggPeriod: 2s\n")
	startNode(t, c, n)
	priorityClass(t, c, "e2e-high", 1000)
	ns := c.Namespace(t, "evict-disk")
	ctx := context.Background()

	quiet := busyboxPod("quiet", name, "sleep 3600")
	high := withEmptyDir(busyboxPod("high", name, "dd if=/dev/zero of=/data/f bs=1M count=10 && sleep 3600"), "")
	high.Spec.PriorityClassName = "e2e-high"
	low := withEmptyDir(busyboxPod("low", name, "dd if=/dev/zero of=/data/f bs=1M count=25 && sleep 3600"), "")
	createPods(t, c, ns, quiet, high, low)
	started := time.Now()
	evicted := waitPod(t, c, ns, "low", 90*time.Second, "evicted for disk pressure",
		evictedWith("The node was low on resource: ephemeral-storage. Threshold quantity: "))
	t.Logf("low evicted %v after the pods were created: %q", time.Since(started).Round(100*time.Millisecond), evicted.Status.Message)
	if cond := disruptionTarget(evicted); cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "TerminationByKubelet" || cond.Message != evicted.Status.Message {
		t.Errorf("DisruptionTarget %+v", cond)
	}
	var ev *v1.Event
	framework.Eventually(t, 20*time.Second, 500*time.Millisecond, func() bool {
		for _, e := range podEvents(t, c, ns, "low") {
			if e.Reason == "Evicted" {
				ev = &e
				return true
			}
		}
		return false
	}, "the Evicted event")
	if ev.Type != v1.EventTypeWarning || ev.Message != evicted.Status.Message || ev.Annotations["starved_resource"] != "ephemeral-storage" {
		t.Errorf("event %s %q annotations %v", ev.Type, ev.Message, ev.Annotations)
	}
	if cond := nodeCondition(t, c, name, v1.NodeDiskPressure); cond == nil || cond.Status != v1.ConditionTrue {
		t.Errorf("DiskPressure at the eviction: %+v", cond)
	}
	waitCondition(t, c, name, v1.NodeDiskPressure, v1.ConditionFalse, "DiskPressure False once the evicted pod's emptyDir is gone")
	for _, p := range []string{"quiet", "high"} {
		if got := c.Pod(t, ns, p); got.Status.Phase != v1.PodRunning {
			t.Errorf("%s is %s (%s: %s)", p, got.Status.Phase, got.Status.Reason, got.Status.Message)
		}
	}
	_, body := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	if !strings.Contains(body, `kubelet_evictions{eviction_signal="nodefs.available"} 1`) {
		t.Errorf("kubelet_evictions not counted:\n%s", grepLines(body, "kubelet_evictions"))
	}
	after := busyboxPod("after", name, "sleep 3600")
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "after", 60*time.Second, "admitted once the pressure is gone", podReady)
}

// TestEvictionLocalStorageLimits mirrors upstream's
// LocalStorageCapacityIsolationEviction: without node pressure, a pod whose
// emptyDir is over its sizeLimit, one over its containers' total
// ephemeral-storage limit and one whose container's logs are over its own
// limit are evicted with upstream's messages (no DisruptionTarget, as
// upstream); a pod within its limits keeps running.
func TestEvictionLocalStorageLimits(t *testing.T) {
	name := "e2e-evict-local"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	n.AppendConfig("volumeStatsAggPeriod: 2s\n")
	startNode(t, c, n)
	ns := c.Namespace(t, "evict-local")
	ctx := context.Background()
	limit := func(p *v1.Pod, q string) *v1.Pod {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
		return p
	}
	// The pod's total limit is checked first: a second container with room
	// makes the first one's own limit the one exceeded.
	logs := limit(busyboxPod("logs", name, "head -c 4194304 /dev/zero | tr '\\0' x; sleep 3600"), "2Mi")
	logs.Spec.Containers = append(logs.Spec.Containers, v1.Container{
		Name: "idle", Image: busybox, Command: []string{"sleep", "3600"},
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}},
	})
	pods := []*v1.Pod{
		withEmptyDir(busyboxPod("emptydir", name, "dd if=/dev/zero of=/data/f bs=1M count=4 && sleep 3600"), "2Mi"),
		limit(withEmptyDir(busyboxPod("podlimit", name, "dd if=/dev/zero of=/data/f bs=1M count=4 && sleep 3600"), ""), "2Mi"),
		logs,
		limit(withEmptyDir(busyboxPod("within", name, "dd if=/dev/zero of=/data/f bs=1M count=1 && sleep 3600"), "8Mi"), "8Mi"),
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for pod, msg := range map[string]string{
		"emptydir": `Usage of EmptyDir volume "data" exceeds the limit "2Mi". `,
		"podlimit": "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ",
		"logs":     `Container c exceeded its local ephemeral storage limit "2Mi". `,
	} {
		p := waitPod(t, c, ns, pod, 90*time.Second, "evicted over its limit", evictedWith(msg))
		if p.Status.Message != msg {
			t.Errorf("%s: message %q, want %q", pod, p.Status.Message, msg)
		}
		if cond := disruptionTarget(p); cond != nil {
			t.Errorf("%s: DisruptionTarget %+v for a local storage limit", pod, cond)
		}
	}
	if p := c.Pod(t, ns, "within"); p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod within its limits is %s (%s: %s)", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if cond := nodeCondition(t, c, name, v1.NodeDiskPressure); cond == nil || cond.Status != v1.ConditionFalse {
		t.Errorf("DiskPressure %+v", cond)
	}
}

// grepLines are the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// tmpfsRoot mounts a tmpfs with opts on the nodelet's root directory for
// the test.
func tmpfsRoot(t *testing.T, n *framework.Nodelet, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", n.RootDir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		n.Stop()
		framework.UnmountUnder(n.RootDir, t.Logf)
		_ = exec.Command("umount", "-l", n.RootDir).Run()
	})
}

// TestEvictionInodes mirrors upstream's InodeEviction: the root directory
// is a tmpfs of 4000 inodes, nodefs.inodesFree's hard threshold 50%; a pod
// creating 2500 files in its emptyDir is evicted ("The node was low on
// resource: inodes."), a quiet one stays, the pressure clears.
func TestEvictionInodes(t *testing.T) {
	name := "e2e-evict-inodes"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	tmpfsRoot(t, n, "size=64m,nr_inodes=4000")
	n.AppendConfig("evictionHard:\n  nodefs.inodesFree: \"50%\"\nevictionPressureTransitionPeriod: 5s\nvolumeStatsAggPeriod: 2s\n")
	startNode(t, c, n)
	ns := c.Namespace(t, "evict-inodes")
	quiet := busyboxPod("quiet", name, "sleep 3600")
	hog := withEmptyDir(busyboxPod("hog", name, "cd /data && for i in $(seq 2500); do : > f$i; done; sleep 3600"), "")
	createPods(t, c, ns, quiet, hog)
	started := time.Now()
	p := waitPod(t, c, ns, "hog", 90*time.Second, "evicted for inodes", evictedWith("The node was low on resource: inodes. Threshold quantity: 2000, available: "))
	t.Logf("hog evicted %v after the pods were created: %q", time.Since(started).Round(100*time.Millisecond), p.Status.Message)
	waitCondition(t, c, name, v1.NodeDiskPressure, v1.ConditionFalse, "DiskPressure False once the files are gone")
	wantRunning(t, c, ns, "quiet")
}

// TestEvictionPIDs mirrors upstream's PriorityPidEvictionOrdering:
// pid.available's hard threshold 250 below what is available when the test
// starts; a pod forking 500 sleeping processes brings the node under PID
// pressure and is evicted ("The node was low on resource: pids."), a quiet
// pod of a higher priority stays, the pressure clears.
func TestEvictionPIDs(t *testing.T) {
	name := "e2e-evict-pids"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	max, procs := pidFigures(t)
	threshold := max - procs - 250
	n.AppendConfig(fmt.Sprintf("evictionHard:\n  pid.available: \"%d\"\nevictionPressureTransitionPeriod: 5s\n", threshold))
	startNode(t, c, n)
	if cond := nodeCondition(t, c, name, v1.NodePIDPressure); cond == nil || cond.Status != v1.ConditionFalse {
		t.Fatalf("PIDPressure before the fork: %+v", cond)
	}
	priorityClass(t, c, "e2e-high", 1000)
	ns := c.Namespace(t, "evict-pids")
	quiet := busyboxPod("quiet", name, "sleep 3600")
	quiet.Spec.PriorityClassName = "e2e-high"
	hog := busyboxPod("hog", name, "for i in $(seq 500); do sleep 3600 & done; wait")
	createPods(t, c, ns, quiet, hog)
	started := time.Now()
	p := waitPod(t, c, ns, "hog", 90*time.Second, "evicted for PIDs", evictedWith("The node was low on resource: pids. Threshold quantity: "))
	t.Logf("hog evicted %v after the pods were created: %q", time.Since(started).Round(100*time.Millisecond), p.Status.Message)
	waitCondition(t, c, name, v1.NodePIDPressure, v1.ConditionFalse, "PIDPressure False once the processes are gone")
	wantRunning(t, c, ns, "quiet")
}

// pidFigures are the PID limit (the lower of pid_max and threads-max) and
// the number of tasks (/proc/loadavg), as nodelet's pid.available reads
// them.
func pidFigures(t *testing.T) (max, procs int64) {
	t.Helper()
	read := func(path string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	max = min(read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max"))
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	_, total, _ := strings.Cut(f[3], "/")
	if _, err := fmt.Sscan(total, &procs); err != nil {
		t.Fatal(err)
	}
	return max, procs
}

// nodeMemoryAvailable is nodelet's memory.available now: MemTotal minus
// the root memory cgroup's working set (usage - inactive_file), cgroup v1.
func nodeMemoryAvailable(t *testing.T) int64 {
	t.Helper()
	read := func(path, key string) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if key == "" && len(f) == 1 || len(f) >= 2 && strings.TrimSuffix(f[0], ":") == key {
				var v int64
				fmt.Sscan(f[len(f)-1], &v)
				if len(f) == 3 && f[2] == "kB" {
					v = 0
					fmt.Sscan(f[1], &v)
					v *= 1024
				}
				return v
			}
		}
		t.Fatalf("no %q in %s", key, path)
		return 0
	}
	total := read("/proc/meminfo", "MemTotal")
	usage := read("/sys/fs/cgroup/memory/memory.usage_in_bytes", "")
	inactive := read("/sys/fs/cgroup/memory/memory.stat", "total_inactive_file")
	return total - (usage - inactive)
}

// TestEvictionMemory mirrors upstream's PriorityMemoryEvictionOrdering, and
// shows the kernel's threshold notification at work: memory.available's
// hard threshold 300 MiB below what is available when the test starts; a
// pod holding 500 MiB over its 1 MiB request (its container limited to
// 800 MiB, so the machine is never at risk) is evicted ("The node was low on resource:
// memory." with its container's usage), a Burstable pod of a higher
// priority stays, MemoryPressure clears. The crossing is observed when the
// kernel signals it, not at the next 10 s period.
func TestEvictionMemory(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.event_control"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy")
	}
	name := "e2e-evict-memory"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	threshold := nodeMemoryAvailable(t) - 300<<20
	n.AppendConfig(fmt.Sprintf("evictionHard:\n  memory.available: \"%d\"\nevictionPressureTransitionPeriod: 5s\n", threshold))
	startNode(t, c, n)
	if cond := nodeCondition(t, c, name, v1.NodeMemoryPressure); cond == nil || cond.Status != v1.ConditionFalse {
		t.Fatalf("MemoryPressure before the hog: %+v", cond)
	}
	priorityClass(t, c, "e2e-high", 1000)
	ns := c.Namespace(t, "evict-memory")
	ctx := context.Background()
	quiet := busyboxPod("quiet", name, "sleep 3600")
	quiet.Spec.PriorityClassName = "e2e-high"
	quiet.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, quiet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "quiet", 60*time.Second, "running", podReady)
	// 500 MiB written to a memory-backed emptyDir: tmpfs pages, charged to
	// the container's memory cgroup and counted in its working set until
	// the volume goes.
	hog := busyboxPod("hog", name, "dd if=/dev/zero of=/mem/fill bs=1M count=500; sleep 3600")
	hog.Spec.Volumes = []v1.Volume{{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
		Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("600Mi"))}}}}
	hog.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}}
	hog.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("800Mi")}
	// A request far below its usage: the hog ranks first (over its request,
	// lowest priority), as in upstream's test.
	hog.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Mi")}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, c, ns, "hog", 60*time.Second, "running or evicted", func(p *v1.Pod) bool {
		return podReady(p) || p.Status.Phase == v1.PodFailed
	})
	started := time.Now()
	if running.Status.Phase != v1.PodFailed {
		running = waitPod(t, c, ns, "hog", 60*time.Second, "evicted for memory", evictedWith("The node was low on resource: memory. Threshold quantity: "))
	}
	t.Logf("hog evicted %v after it was seen running: %q", time.Since(started).Round(100*time.Millisecond), running.Status.Message)
	if !evictedWith("The node was low on resource: memory. ")(running) || !strings.Contains(running.Status.Message, "Container c was using ") {
		t.Errorf("hog: %s %s %q", running.Status.Phase, running.Status.Reason, running.Status.Message)
	}
	if !strings.Contains(n.Log(), "Memory usage crossed a threshold level") {
		t.Errorf("the kernel's threshold notification never woke the eviction manager")
	}
	waitCondition(t, c, name, v1.NodeMemoryPressure, v1.ConditionFalse, "MemoryPressure False once the hog is gone")
	wantRunning(t, c, ns, "quiet")
}

// TestEvictionSoftDisk mirrors upstream's LocalStorageSoftEviction: a soft
// nodefs.available threshold with a 5 s grace period and
// evictionMaxPodGracePeriod 2: DiskPressure turns True at once, the filler
// is evicted only once the grace period has passed, and stopped within its
// capped grace period (2 s, not its own 30 s: it ignores SIGTERM).
func TestEvictionSoftDisk(t *testing.T) {
	name := "e2e-evict-soft"
	c := framework.RequireCluster(t)
	n := framework.NewClusterNodelet(t, c, name)
	tmpfsRoot(t, n, "size=64m")
	n.AppendConfig("evictionHard: {}\nevictionSoft:\n  nodefs.available: \"50%\"\nevictionSoftGracePeriod:\n  nodefs.available: 5s\n" +
		"evictionMaxPodGracePeriod: 2\nevictionPressureTransitionPeriod: 5s\nvolumeStatsAggPeriod: 2s\n")
	startNode(t, c, n)
	ns := c.Namespace(t, "evict-soft")
	ctx := context.Background()
	hog := withEmptyDir(busyboxPod("hog", name, "trap '' TERM; dd if=/dev/zero of=/data/f bs=1M count=40; sleep 3600"), "")
	hog.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pressure time.Time
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		cond := nodeCondition(t, c, name, v1.NodeDiskPressure)
		if cond != nil && cond.Status == v1.ConditionTrue {
			pressure = time.Now()
			return true
		}
		return podEvicted(c.Pod(t, ns, "hog"))
	}, "DiskPressure True")
	p := waitPod(t, c, ns, "hog", 60*time.Second, "evicted once the soft grace period passed",
		evictedWith("The node was low on resource: ephemeral-storage. Threshold quantity: "))
	evicted := time.Now()
	if pressure.IsZero() {
		t.Fatalf("evicted before DiskPressure was seen True")
	}
	t.Logf("evicted %v after DiskPressure was seen True (soft grace period 5 s)", evicted.Sub(pressure).Round(100*time.Millisecond))
	if d := evicted.Sub(pressure); d < 4*time.Second {
		t.Errorf("evicted %v after DiskPressure turned True, within the 5 s soft grace period", d)
	}
	// Stopped within the capped grace period: the container's end comes
	// about 2 s after the eviction, not 30.
	framework.Eventually(t, 20*time.Second, 200*time.Millisecond, func() bool {
		for _, ctr := range c.Containers(t, p.Name, "c") {
			if ctr.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false
			}
		}
		return true
	}, "the hog's container stopped")
	t.Logf("the hog (ignoring SIGTERM, grace 30 s) stopped %v after its eviction", time.Since(evicted).Round(100*time.Millisecond))
	if d := time.Since(evicted); d > 10*time.Second {
		t.Errorf("the hog took %v to stop after its eviction (grace capped at 2 s)", d)
	}
}

func podEvicted(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
}
