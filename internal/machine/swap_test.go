package machine

import (
	"os"
	"path/filepath"
	"testing"
)

const swapsHeader = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"

// The swap facts, as upstream reads them: /proc/swaps beyond its header,
// SwapTotal, the swap controller (memory.swap.max in this process's v2
// cgroup, memory.memsw.limit_in_bytes on v1) and tmpfs noswap.
func TestReadSwap(t *testing.T) {
	for _, tt := range []struct {
		name    string
		swaps   string // none: no /proc/swaps
		meminfo string
		v2      bool
		swapMax string // where memory.swap.max is, under the mount (v2)
		memsw   bool   // memory/memory.memsw.limit_in_bytes (v1)
		kernel  string
		uidMap  string // "": no self/uid_map; "blank": an empty first line
		want    Swap
	}{
		{name: "off, v1 without memsw", swaps: swapsHeader, meminfo: "SwapTotal:  0 kB\n", kernel: "6.1.0-50-amd64"},
		{name: "header alone with a trailing blank line: off", swaps: swapsHeader + "\n\n", kernel: "6.1.0"},
		{name: "on, v2 with the controller in the process's cgroup, kernel 6.18", swaps: swapsHeader + "/swapfile  file  1048572  0  -2\n",
			meminfo: "MemTotal: 2 kB\nSwapTotal:  1048572 kB\n", v2: true, swapMax: "system.slice/nodelet.service", kernel: "6.18.0",
			want: Swap{On: true, Capacity: 1048572 * 1024, ControllerAvailable: true, TmpfsNoswap: true}},
		{name: "v2, memory.swap.max only in another cgroup", swaps: swapsHeader, v2: true, swapMax: "kubepods.slice", kernel: "6.4-rc1",
			want: Swap{TmpfsNoswap: true}},
		{name: "v2, memory.swap.max only at the root (upstream looks in its own cgroup)", swaps: swapsHeader, v2: true, swapMax: ".", kernel: "5.10.0"},
		{name: "v1 with memsw", swaps: swapsHeader, memsw: true, kernel: "5.15.0", want: Swap{ControllerAvailable: true}},
		{name: "v2 ignores v1's memsw", swaps: swapsHeader, v2: true, memsw: true, kernel: "5.15.0"},
		{name: "no /proc/swaps: off; unreadable kernel: no noswap", swaps: "none", kernel: "garbage"},
		{name: "initial user namespace, kernel 6.4: noswap", swaps: swapsHeader, kernel: "6.4.0", uidMap: "         0          0 4294967295\n",
			want: Swap{TmpfsNoswap: true}},
		{name: "in a user namespace: no noswap, whatever the kernel", swaps: swapsHeader, kernel: "6.12.0", uidMap: "         0     100000      65536\n"},
		{name: "user namespace being set up (a blank uid_map line): no noswap", swaps: swapsHeader, kernel: "6.12.0", uidMap: "blank"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			proc, cg := t.TempDir(), t.TempDir()
			if tt.swaps != "none" {
				write(t, filepath.Join(proc, "swaps"), tt.swaps)
			}
			write(t, filepath.Join(proc, "meminfo"), tt.meminfo)
			write(t, filepath.Join(proc, "self/cgroup"), "0::/system.slice/nodelet.service\n")
			write(t, filepath.Join(proc, "sys/kernel/osrelease"), tt.kernel+"\n")
			switch tt.uidMap {
			case "":
			case "blank":
				write(t, filepath.Join(proc, "self/uid_map"), "\n")
			default:
				write(t, filepath.Join(proc, "self/uid_map"), tt.uidMap)
			}
			if tt.swapMax != "" {
				write(t, filepath.Join(cg, tt.swapMax, "memory.swap.max"), "max\n")
			}
			if tt.memsw {
				write(t, filepath.Join(cg, "memory/memory.memsw.limit_in_bytes"), "9223372036854771712\n")
			}
			if got := readSwap(proc, Cgroups{Mount: cg, V2: tt.v2}); got != tt.want {
				t.Errorf("readSwap = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, tt := range []struct {
		release string
		want    bool
	}{
		{"6.4.0", true}, {"6.18.2-custom", true}, {"7.0", true}, {"6.1.0-50-amd64", false},
		{"5.15.0", false}, {"6.4-rc1", true}, {"6", false}, {"", false}, {"x.y", false},
	} {
		if got := KernelAtLeast(tt.release, 6, 4); got != tt.want {
			t.Errorf("KernelAtLeast(%q, 6, 4) = %v, want %v", tt.release, got, tt.want)
		}
	}
}
