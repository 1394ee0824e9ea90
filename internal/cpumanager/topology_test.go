package cpumanager

import (
	"os"
	"path/filepath"
	"testing"
)

// sysfsCPUs writes a sysfs tree of four CPUs on one socket and NUMA node
// 0: cores {0,2} and {1,3}, each CPU's L3 shared per the map (hex).
func sysfsCPUs(t *testing.T, l3 map[int]struct{ id, sharedMap string }) string {
	t.Helper()
	root := t.TempDir()
	base := filepath.Join(root, "sys/devices/system/cpu")
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(base, "online"), "0-3")
	for cpu, siblings := range map[int]string{0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"} {
		dir := filepath.Join(base, "cpu"+string(rune('0'+cpu)))
		write(filepath.Join(dir, "topology/physical_package_id"), "0")
		write(filepath.Join(dir, "topology/thread_siblings_list"), siblings)
		if err := os.MkdirAll(filepath.Join(dir, "node0"), 0o755); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(dir, "cache/index1/level"), "2")
		write(filepath.Join(dir, "cache/index1/id"), "9")
		write(filepath.Join(dir, "cache/index1/shared_cpu_map"), "f")
		write(filepath.Join(dir, "cache/index3/level"), "3")
		write(filepath.Join(dir, "cache/index3/id"), l3[cpu].id)
		write(filepath.Join(dir, "cache/index3/shared_cpu_map"), l3[cpu].sharedMap)
	}
	return root
}

// TestDiscover: cores are their lowest thread; an L3 shared by part of
// the NUMA node is the CPU's uncore cache, one spanning it falls back to
// the socket (cadvisor's rule, as upstream sees it).
func TestDiscover(t *testing.T) {
	type l3 = struct{ id, sharedMap string }
	split := sysfsCPUs(t, map[int]l3{0: {"4", "5"}, 2: {"4", "5"}, 1: {"7", "a"}, 3: {"7", "a"}})
	topo, err := Discover(split)
	if err != nil {
		t.Fatal(err)
	}
	want := CPUDetails{0: {CoreID: 0, UncoreCacheID: 4}, 1: {CoreID: 1, UncoreCacheID: 7}, 2: {CoreID: 0, UncoreCacheID: 4}, 3: {CoreID: 1, UncoreCacheID: 7}}
	for cpu, info := range want {
		if topo.CPUDetails[cpu] != info {
			t.Errorf("CPU %d: %+v, want %+v", cpu, topo.CPUDetails[cpu], info)
		}
	}
	if topo.NumCPUs != 4 || topo.NumCores != 2 || topo.NumUncoreCache != 2 || topo.NumSockets != 1 || topo.NumNUMANodes != 1 || topo.CPUsPerCore() != 2 {
		t.Errorf("counts %+v", topo)
	}
	whole := sysfsCPUs(t, map[int]l3{0: {"4", "f"}, 1: {"4", "f"}, 2: {"4", "f"}, 3: {"4", "f"}})
	if topo, err = Discover(whole); err != nil {
		t.Fatal(err)
	}
	if topo.NumUncoreCache != 1 || topo.CPUDetails[3].UncoreCacheID != 0 {
		t.Errorf("an L3 spanning the NUMA node: %+v", topo)
	}
	if !topo.UncoreAligned(mustParseCPUSet(t, "0-3")) {
		t.Error("one uncore cache is not aligned")
	}
	if _, err := Discover(t.TempDir()); err == nil {
		t.Error("no sysfs: no error")
	}
}
