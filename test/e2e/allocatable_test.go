package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
	v1 "k8s.io/api/core/v1"
)

// makeCgroup creates cgroup name (a cgroupfs path) in every v1 hierarchy
// and removes it, with the cgroups left below it (the pods' of a stopped
// nodelet, once their processes are gone), when the test ends.
func makeCgroup(t *testing.T, name string) {
	t.Helper()
	ents, err := os.ReadDir(cgroupMount)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		h := filepath.Join(cgroupMount, e.Name())
		if real, err := filepath.EvalSymlinks(h); err != nil || real != h {
			continue // a co-mounted alias (cpu -> cpu,cpuacct)
		}
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(h, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeCgroupTree(dir) })
	}
}

// removeCgroupTree removes cgroup directory dir and those below it,
// deepest first (a cgroup directory goes with rmdir alone).
func removeCgroupTree(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(100 * time.Millisecond) // processes still leaving
	}
}

// TestNodeAllocatableReserved: enforceNodeAllocatable with
// "kube-reserved" and "system-reserved" writes kubeReserved and
// systemReserved into kubeReservedCgroup and systemReservedCgroup, pods'
// cgroup (under a cgroupRoot of the test's own) gets capacity minus both,
// the node's events say so as upstream's; a reserved cgroup that does not
// exist stops nodelet at startup with upstream's message.
func TestNodeAllocatableReserved(t *testing.T) {
	if !cgroupV1() {
		t.Skip("reads cgroup v1 files")
	}
	name := "e2e-reserved"
	c := framework.RequireCluster(t)
	root, kube, system := "/e2e-reserved-root", "/e2e-kube-reserved", "/e2e-system-reserved"
	makeCgroup(t, root)
	makeCgroup(t, kube)
	makeCgroup(t, system)
	n := framework.NewClusterNodelet(t, c, name)
	n.AppendConfig(fmt.Sprintf(`cgroupRoot: %s
enforceNodeAllocatable: [pods, kube-reserved, system-reserved]
kubeReserved: {cpu: 100m, memory: 64Mi, pid: "500"}
systemReserved: {memory: 128Mi}
kubeReservedCgroup: %s
systemReservedCgroup: %s
`, root, kube, system))
	startNode(t, c, n)
	mem := func(cg string) string {
		return readTrimmed(t, filepath.Join(cgroupMount, "memory", cg, "memory.limit_in_bytes"))
	}
	if got := mem(kube); got != strconv.Itoa(64<<20) {
		t.Errorf("%s memory.limit_in_bytes %s, want 64Mi", kube, got)
	}
	if got := readTrimmed(t, filepath.Join(cgroupMount, "cpu", kube, "cpu.shares")); got != "102" {
		t.Errorf("%s cpu.shares %s, want 102", kube, got)
	}
	if got := readTrimmed(t, filepath.Join(cgroupMount, "pids", kube, "pids.max")); got != "500" {
		t.Errorf("%s pids.max %s, want 500", kube, got)
	}
	if got := mem(system); got != strconv.Itoa(128<<20) {
		t.Errorf("%s memory.limit_in_bytes %s, want 128Mi", system, got)
	}
	if got, want := mem(root+"/kubepods"), strconv.FormatInt(memTotalBytes(t)-192<<20, 10); got != want {
		t.Errorf("%s/kubepods memory.limit_in_bytes %s, want capacity - 192Mi = %s", root, got, want)
	}
	framework.Eventually(t, 30*time.Second, 500*time.Millisecond, func() bool {
		evs := nodeEventReasons(t, c, name)
		return hasEvent(evs, "NodeAllocatableEnforced: Updated Node Allocatable limit across pods") &&
			hasEvent(evs, "NodeAllocatableEnforced: Updated limits on kube reserved cgroup "+kube) &&
			hasEvent(evs, "NodeAllocatableEnforced: Updated limits on system reserved cgroup "+system)
	}, "the node's NodeAllocatableEnforced events")

	n.Stop()
	missing := "/e2e-reserved-missing"
	cfg, err := os.ReadFile(n.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.ConfigFile, []byte(strings.Replace(string(cfg), "kubeReservedCgroup: "+kube, "kubeReservedCgroup: "+missing, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, n.Exited, "nodelet stops at startup without its kube reserved cgroup")
	// As klog quotes it in the error's value.
	want := fmt.Sprintf(`Failed to enforce Kube Reserved Cgroup Limits on \"%s\": cgroup \"%s\" has some missing paths: `, missing, missing)
	if !strings.Contains(n.Log(), want) {
		t.Errorf("nodelet's log lacks %q:\n%s", want, grepLines(n.Log(), "Failed"))
	}
}

// oomKills is the kernel's count of OOM kills (/proc/vmstat oom_kill):
// cgroup v1 counts a kill in the victim's own memory cgroup only, which
// goes with its container.
func oomKills(t *testing.T) int64 {
	t.Helper()
	for _, line := range strings.Split(readTrimmed(t, "/proc/vmstat"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	t.Fatal("no oom_kill in /proc/vmstat")
	return 0
}

// hogScript grows a process's memory by 10 MiB every 0.1 s (busybox tail
// holding a line that never ends) up to mib MiB, then holds it; the
// container ends if tail is killed (the OOM killer's victim).
func hogScript(mib int) string {
	return fmt.Sprintf("(i=0; while [ $i -lt %d ]; do head -c 10485760 /dev/zero || exit 1; sleep 0.1; i=$((i+1)); done; sleep 3600) | tail >/dev/null", mib/10)
}

// TestEvictionAllocatableMemory: upstream's allocatableMemory.available,
// the twin of the hard memory.available threshold on the pods' cgroup
// (enforceNodeAllocatable "pods"), with nodelet's kernel notification on
// that cgroup. kubepods (under a cgroupRoot of the test's own) is limited
// to 700 MiB by systemReserved, the threshold is 250Mi: a BestEffort hog
// growing ~75 MiB/s towards 1000 MiB crosses it at ~450 MiB and is evicted
// (upstream's message) before the kernel's OOM killer acts at 700 MiB; a
// higher-priority pod keeps running.
func TestEvictionAllocatableMemory(t *testing.T) {
	if !cgroupV1() {
		t.Skip("reads cgroup v1 files")
	}
	name := "e2e-evict-allocatable"
	c := framework.RequireCluster(t)
	root := "/e2e-allocatable-root"
	makeCgroup(t, root)
	n := framework.NewClusterNodelet(t, c, name)
	n.AppendConfig(fmt.Sprintf("cgroupRoot: %s\nsystemReserved: {memory: \"%d\"}\nevictionHard:\n  memory.available: 250Mi\nevictionPressureTransitionPeriod: 5s\n",
		root, memTotalBytes(t)-700<<20))
	startNode(t, c, n)
	kubepods := root + "/kubepods"
	if got := readTrimmed(t, filepath.Join(cgroupMount, "memory", kubepods, "memory.limit_in_bytes")); got != strconv.Itoa(700<<20) {
		t.Fatalf("kubepods memory limit %s, want 700Mi", got)
	}
	oomBefore, failBefore := oomKills(t), readTrimmed(t, filepath.Join(cgroupMount, "memory", kubepods, "memory.failcnt"))
	priorityClass(t, c, "e2e-high", 1000)
	ns := c.Namespace(t, "evict-allocatable")
	quiet := busyboxPod("quiet", name, "sleep 3600")
	quiet.Spec.PriorityClassName = "e2e-high"
	createPods(t, c, ns, quiet)
	waitPod(t, c, ns, "quiet", 60*time.Second, "running", podReady)
	createPods(t, c, ns, busyboxPod("hog", name, hogScript(1000)))
	hog := waitPod(t, c, ns, "hog", 90*time.Second, "evicted for memory", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if !evictedWith("The node was low on resource: memory. Threshold quantity: 250Mi, available: ")(hog) {
		t.Errorf("hog: %s %s %q", hog.Status.Phase, hog.Status.Reason, hog.Status.Message)
	}
	for _, cs := range hog.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.Reason == "OOMKilled" {
			t.Errorf("the hog was OOM-killed before its eviction: %+v", term)
		}
	}
	if got := oomKills(t); got != oomBefore {
		t.Errorf("%d OOM kills during the test", got-oomBefore)
	}
	if got := readTrimmed(t, filepath.Join(cgroupMount, "memory", kubepods, "memory.failcnt")); got != failBefore {
		t.Errorf("kubepods hit its memory limit (failcnt %s, was %s): the hog was not evicted in time", got, failBefore)
	}
	// The loop's logger names the loop (loop="eviction") before the line's own keys.
	if !regexp.MustCompile(`"Memory usage crossed a threshold level: observing the signals now".* signal="allocatableMemory.available"`).MatchString(n.Log()) {
		t.Errorf("the kernel's threshold notification on the pods' cgroup never woke the eviction manager")
	}
	waitCondition(t, c, name, v1.NodeMemoryPressure, v1.ConditionFalse, "MemoryPressure False once the hog is gone")
	wantRunning(t, c, ns, "quiet")
}
