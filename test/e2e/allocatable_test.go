package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// makeCgroup creates cgroup name (a cgroupfs path) in every v1 hierarchy
// and removes it when the test ends.
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
		t.Cleanup(func() { _ = os.Remove(dir) })
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
	// Cleanups run last first: the pods' cgroups (made by nodelet) go
	// before their root.
	makeCgroup(t, root)
	t.Cleanup(func() {
		for _, h := range []string{"memory", "cpu,cpuacct", "cpuset", "pids", "hugetlb", "systemd", "unified", "blkio", "devices", "freezer"} {
			for _, d := range []string{"kubepods/burstable", "kubepods/besteffort", "kubepods"} {
				_ = os.Remove(filepath.Join(cgroupMount, h, root, d))
			}
		}
	})
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
