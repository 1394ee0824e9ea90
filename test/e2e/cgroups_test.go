package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

const cgroupMount = "/sys/fs/cgroup"

// cgroupV1 tells whether the machine runs cgroup v1 (hybrid included): the
// e2e cgroup checks read v1 files.
func cgroupV1() bool {
	_, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers"))
	return err != nil
}

// podContainers lists the containers of the pod with this UID.
func podContainers(t *testing.T, c *framework.Cluster, uid string) []*runtimeapi.Container {
	t.Helper()
	cs, err := c.Runtime.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// pidOf is the host PID of a container's (or sandbox's) main process.
func pidOf(t *testing.T, info map[string]string) int {
	t.Helper()
	var v struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(info["info"]), &v); err != nil || v.Pid == 0 {
		t.Fatalf("no pid in the runtime's info: %v", err)
	}
	return v.Pid
}

func containerPid(t *testing.T, c *framework.Cluster, id string) int {
	t.Helper()
	st, err := c.Runtime.ContainerStatus(context.Background(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return pidOf(t, st.Info)
}

func sandboxPid(t *testing.T, c *framework.Cluster, uid string) int {
	t.Helper()
	boxes, err := c.Runtime.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid},
	})
	if err != nil || len(boxes) != 1 {
		t.Fatalf("sandboxes of %s: %d, %v", uid, len(boxes), err)
	}
	st, err := c.Runtime.PodSandboxStatus(context.Background(), boxes[0].Id, true)
	if err != nil {
		t.Fatal(err)
	}
	return pidOf(t, st.Info)
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// procCgroup is the path of pid's cgroup in the v1 hierarchy of controller.
func procCgroup(t *testing.T, pid int, controller string) string {
	t.Helper()
	for _, line := range strings.Split(readTrimmed(t, fmt.Sprintf("/proc/%d/cgroup", pid)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ","+controller+",") {
			return parts[2]
		}
	}
	t.Fatalf("pid %d has no %s cgroup", pid, controller)
	return ""
}

// containerdOOMScoreAdj is the oom_score_adj of the stack's containerd:
// with restrict_oom_score_adj it raises lower container values to it.
func containerdOOMScoreAdj(t *testing.T, c *framework.Cluster) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "containerd" && strings.HasPrefix(args[2], c.RepoRoot) {
			v, err := strconv.Atoi(readTrimmed(t, fmt.Sprintf("/proc/%d/oom_score_adj", pid)))
			return v, err == nil
		}
	}
	return 0, false
}

func memTotalBytes(t *testing.T) int64 {
	t.Helper()
	for _, line := range strings.Split(readTrimmed(t, "/proc/meminfo"), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// podCgroupDirs lists pod<uid> directories left in any hierarchy.
func podCgroupDirs(uid string) []string {
	var out []string
	for _, pattern := range []string{"*/kubepods/pod", "*/kubepods/*/pod", "kubepods/pod", "kubepods/*/pod"} {
		m, _ := filepath.Glob(filepath.Join(cgroupMount, pattern+uid))
		out = append(out, m...)
	}
	return out
}

// TestClusterPodCgroups runs a Guaranteed, a Burstable and a BestEffort pod
// and checks their pod cgroups (place and limits, from the host and from
// inside), their QoS class, the containers' oom_score_adj, and that the
// cgroups go with the pods; then a container over its memory limit is
// reported OOMKilled.
func TestClusterPodCgroups(t *testing.T) {
	if !cgroupV1() {
		t.Skip("the checks read cgroup v1 files; this machine runs cgroup v2")
	}
	name := "e2e-cgroups"
	c, _ := clusterNode(t, name, "")
	ns := c.Namespace(t, "cgroups")
	ctx := context.Background()
	q := resource.MustParse
	const loop = "trap 'exit 0' TERM; while true; do sleep 0.2; done"

	guaranteed := busyboxPod("guaranteed", name, loop)
	guaranteed.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: q("200m"), v1.ResourceMemory: q("64Mi")},
	}
	burstable := busyboxPod("burstable", name, loop)
	burstable.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: q("128Mi")},
	}
	besteffort := busyboxPod("besteffort", name, loop)
	for _, p := range []*v1.Pod{guaranteed, burstable, besteffort} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	containerdAdj, haveContainerdAdj := containerdOOMScoreAdj(t, c)
	memTotal := memTotalBytes(t)
	type want struct {
		qos       v1.PodQOSClass
		dir       string // under kubepods
		shares    string
		quota     string
		podMemory string // pod cgroup memory.limit_in_bytes; "" unlimited
		ctrMemory string // the container's, read inside; "" unlimited
		oomAdj    int    // upstream's value, before containerd's restriction
	}
	burstableAdj := int(1000 - 1000*(32<<20)/memTotal)
	burstableAdj = max(min(burstableAdj, 999), 3)
	wants := map[string]want{
		"guaranteed": {v1.PodQOSGuaranteed, "", "204", "20000", strconv.Itoa(64 << 20), strconv.Itoa(64 << 20), -997},
		"burstable":  {v1.PodQOSBurstable, "burstable/", "102", "-1", strconv.Itoa(128 << 20), strconv.Itoa(128 << 20), burstableAdj},
		"besteffort": {v1.PodQOSBestEffort, "besteffort/", "2", "-1", "", "", 1000},
	}
	uids := map[string]string{}
	for pname, w := range wants {
		p := waitPod(t, c, ns, pname, 60*time.Second, "Running", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodRunning && podReady(p)
		})
		uid := string(p.UID)
		uids[pname] = uid
		if p.Status.QOSClass != w.qos {
			t.Errorf("%s: status.qosClass %q, want %q", pname, p.Status.QOSClass, w.qos)
		}
		// The pod cgroup, from the host.
		rel := "kubepods/" + w.dir + "pod" + uid
		cpuDir := filepath.Join(cgroupMount, "cpu", rel)
		memDir := filepath.Join(cgroupMount, "memory", rel)
		if got := readTrimmed(t, filepath.Join(cpuDir, "cpu.shares")); got != w.shares {
			t.Errorf("%s: %s/cpu.shares %s, want %s", pname, cpuDir, got, w.shares)
		}
		if got := readTrimmed(t, filepath.Join(cpuDir, "cpu.cfs_quota_us")); got != w.quota {
			t.Errorf("%s: cpu.cfs_quota_us %s, want %s", pname, got, w.quota)
		}
		if w.quota != "-1" {
			if got := readTrimmed(t, filepath.Join(cpuDir, "cpu.cfs_period_us")); got != "100000" {
				t.Errorf("%s: cpu.cfs_period_us %s, want 100000", pname, got)
			}
		}
		podMem := readTrimmed(t, filepath.Join(memDir, "memory.limit_in_bytes"))
		if w.podMemory != "" && podMem != w.podMemory || w.podMemory == "" && len(podMem) < 15 {
			t.Errorf("%s: pod memory.limit_in_bytes %s, want %q (empty: unlimited)", pname, podMem, w.podMemory)
		}
		for _, ctrl := range []string{"cpuset", "pids", "cpuacct", "blkio"} {
			if _, err := os.Stat(filepath.Join(cgroupMount, ctrl, rel)); err != nil {
				t.Errorf("%s: no pod cgroup in the %s hierarchy: %v", pname, ctrl, err)
			}
		}
		t.Logf("%s (%s): %s cpu.shares=%s cfs_quota_us=%s memory.limit_in_bytes=%s", pname, w.qos, rel, w.shares, w.quota, podMem)

		// The container runs below the pod cgroup, sees its own limits
		// inside, and has the oom_score_adj containerd really set.
		cs := podContainers(t, c, uid)
		var ctr *runtimeapi.Container
		for _, x := range cs {
			if x.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				ctr = x
			}
		}
		if ctr == nil {
			t.Fatalf("%s: no running container", pname)
		}
		pid := containerPid(t, c, ctr.Id)
		for _, ctrl := range []string{"memory", "cpu", "pids"} {
			if got := procCgroup(t, pid, ctrl); !strings.HasPrefix(got, "/"+rel+"/") {
				t.Errorf("%s: container in %s cgroup %s, want below /%s", pname, ctrl, got, rel)
			}
		}
		out, stderr, err := c.Runtime.ExecSync(ctx, ctr.Id, []string{"sh", "-c",
			"cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.shares /sys/fs/cgroup/cpu/cpu.cfs_quota_us"}, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: exec: %v %s", pname, err, stderr)
		}
		inside := strings.Fields(string(out))
		if len(inside) != 3 {
			t.Fatalf("%s: inside the container: %q", pname, out)
		}
		if w.ctrMemory != "" && inside[0] != w.ctrMemory || w.ctrMemory == "" && len(inside[0]) < 15 {
			t.Errorf("%s: memory.limit_in_bytes inside the container %s, want %q (empty: unlimited)", pname, inside[0], w.ctrMemory)
		}
		if inside[1] != w.shares || inside[2] != w.quota {
			t.Errorf("%s: inside the container cpu.shares %s cfs_quota_us %s, want %s %s", pname, inside[1], inside[2], w.shares, w.quota)
		}
		adj, _ := strconv.Atoi(readTrimmed(t, fmt.Sprintf("/proc/%d/oom_score_adj", pid)))
		sadj := readTrimmed(t, fmt.Sprintf("/proc/%d/oom_score_adj", sandboxPid(t, c, uid)))
		expected := w.oomAdj
		if haveContainerdAdj && expected < containerdAdj {
			expected = containerdAdj // restrict_oom_score_adj
		}
		t.Logf("%s: container memory.limit_in_bytes inside=%s; oom_score_adj: nodelet asked %d, container has %d, pause has %s (containerd's own: %d)",
			pname, inside[0], w.oomAdj, adj, sadj, containerdAdj)
		if adj != expected {
			t.Errorf("%s: container oom_score_adj %d, want %d", pname, adj, expected)
		}
	}

	// Deleted pods take their cgroups along, in every hierarchy.
	for pname := range wants {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pname, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for pname, uid := range uids {
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, pname, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "pod %s gone from the API", pname)
		framework.Eventually(t, 10*time.Second, 200*time.Millisecond, func() bool {
			return len(podCgroupDirs(uid)) == 0
		}, "pod %s cgroups removed (left: %v)", pname, podCgroupDirs(uid))
	}
	for _, d := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		if _, err := os.Stat(filepath.Join(cgroupMount, "memory", d)); err != nil {
			t.Errorf("QoS cgroup %s: %v", d, err)
		}
	}

	// Over its memory limit: OOMKilled in the API status.
	oom := busyboxPod("oom", name, "tail /dev/zero")
	oom.Spec.RestartPolicy = v1.RestartPolicyNever
	oom.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: q("32Mi")}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, oom, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, c, ns, "oom", 60*time.Second, "terminated", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Terminated != nil
	})
	term := p.Status.ContainerStatuses[0].State.Terminated
	t.Logf("oom: terminated reason %q exit code %d, pod phase %s", term.Reason, term.ExitCode, p.Status.Phase)
	if term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("container over its memory limit: reason %q exit code %d, want OOMKilled 137", term.Reason, term.ExitCode)
	}
	if p.Status.QOSClass != v1.PodQOSBurstable {
		t.Errorf("oom pod qosClass %q", p.Status.QOSClass)
	}
}
