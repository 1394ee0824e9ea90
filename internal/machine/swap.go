package machine

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Swap is what the machine has of swap, as upstream reads it
// (pkg/kubelet/util/swap, cadvisor's SwapCapacity and the kuberuntime's
// checkSwapControllerAvailability).
type Swap struct {
	// On is swap turned on: /proc/swaps lists more than its header, as
	// upstream's isSwapOnAccordingToProcSwaps (no /proc/swaps: off).
	On bool
	// Capacity is SwapTotal of meminfo in bytes (cadvisor's
	// SwapCapacity).
	Capacity int64
	// ControllerAvailable is the swap controller available to
	// containers: memory.swap.max in this process's cgroup on v2 (its
	// path in /proc/self/cgroup, under the v2 mount),
	// memory/memory.memsw.limit_in_bytes of the mount on v1.
	ControllerAvailable bool
	// TmpfsNoswap is tmpfs's noswap mount option supported: see
	// TmpfsNoswapSupported.
	TmpfsNoswap bool
}

// readSwap reads the swap facts under procRoot and the cgroup mount c.
func readSwap(procRoot string, c Cgroups) Swap {
	s := Swap{TmpfsNoswap: TmpfsNoswapSupported(procRoot)}
	if data, err := os.ReadFile(filepath.Join(procRoot, "swaps")); err == nil {
		s.On = swapOn(data)
	}
	s.Capacity = meminfoBytes(filepath.Join(procRoot, "meminfo"), "SwapTotal:")
	if c.V2 {
		s.ControllerAvailable = exists(filepath.Join(c.Mount, selfCgroupV2(filepath.Join(procRoot, "self/cgroup")), "memory.swap.max"))
	} else {
		s.ControllerAvailable = exists(filepath.Join(c.Mount, "memory", "memory.memsw.limit_in_bytes"))
	}
	return s
}

// swapOn tells from /proc/swaps's content whether swap is on: more lines
// than the table's header, as upstream's isSwapOnAccordingToProcSwaps.
func swapOn(procSwaps []byte) bool {
	return len(strings.Split(strings.TrimSpace(string(procSwaps)), "\n")) > 1
}

// TmpfsNoswapSupported tells whether tmpfs may be mounted with the noswap
// option, from procRoot ("/proc"), as upstream's
// IsTmpfsNoswapOptionSupported: not in a user namespace (unprivileged
// tmpfs mounts cannot turn swap off), else a kernel 6.4 or newer. Upstream
// then tries a test mount on older kernels (for a backport); nodelet does
// not: an older kernel is unsupported.
func TmpfsNoswapSupported(procRoot string) bool {
	if inUserNS(filepath.Join(procRoot, "self/uid_map")) {
		return false
	}
	return KernelAtLeast(readTrim(filepath.Join(procRoot, "sys/kernel/osrelease")), 6, 4)
}

// inUserNS tells from a uid_map file whether the process runs in a user
// namespace, as github.com/moby/sys/userns: the initial namespace maps
// "0 0 4294967295"; an empty first line is a namespace being set up; an
// unreadable, empty or unparsable map is not a namespace.
func inUserNS(uidMap string) bool {
	f, err := os.Open(uidMap)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _, err := bufio.NewReader(f).ReadLine()
	if err != nil {
		return false
	}
	if len(line) == 0 {
		return true
	}
	var a, b, c int64
	if _, err := fmt.Sscanf(string(line), "%d %d %d", &a, &b, &c); err != nil {
		return false
	}
	return !(a == 0 && b == 0 && c == 4294967295)
}

// meminfoBytes is the value of key ("SwapTotal:") in a meminfo file, in
// bytes; 0 when absent.
func meminfoBytes(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		fs := strings.Fields(line)
		if len(fs) >= 2 && fs[0] == key {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// selfCgroupV2 is the unified cgroup path ("0::/path") of a
// /proc/self/cgroup file, "/" when none.
func selfCgroupV2(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "/"
	}
	for line := range strings.Lines(string(data)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return p
		}
	}
	return "/"
}

// KernelAtLeast tells whether release ("6.1.0-50-amd64") is major.minor or
// newer; an unreadable release is not.
func KernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	digits := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if digits < 0 {
		digits = len(parts[1])
	}
	mi, err2 := strconv.Atoi(parts[1][:digits])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
