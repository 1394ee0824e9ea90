package agent

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The sysctls the upstream kubelet sets at start unless
// protectKernelDefaults (pkg/kubelet/cm/container_manager_linux.go).
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// Host is what the machine had before the first agent ran: the sysctls an
// upstream kubelet rewrites and its iptables chains. Restore puts it back.
type Host struct {
	sysctls map[string]string
	before  hostState
}

// SnapshotHost reads the host's state; call it before any agent runs.
func SnapshotHost() (*Host, error) {
	h := &Host{sysctls: map[string]string{}, before: snapshotHost()}
	for _, k := range kubeletSysctls {
		out, err := Run("sysctl", "-n", k)
		if err != nil {
			return nil, err
		}
		h.sysctls[k] = strings.TrimSpace(out)
	}
	return h, nil
}

// Restore puts back the sysctls and removes the iptables chains and files
// the upstream kubelet leaves; every agent must be stopped by then.
func (h *Host) Restore() {
	h.RestoreSysctls()
	restoreHost(h.before)
}

// RestoreSysctls puts back the sysctls only.
func (h *Host) RestoreSysctls() {
	for _, k := range kubeletSysctls {
		if v := h.sysctls[k]; v != "" {
			if _, err := Run("sysctl", "-q", "-w", k+"="+v); err != nil {
				log.Printf("restore %s: %v", k, err)
			}
		}
	}
}

// Run runs a command and returns its combined output; the error carries it.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// RemoveKubepods removes /sys/fs/cgroup/*/kubepods, deepest first (rmdir
// only: a cgroup with processes stays, and is reported).
func RemoveKubepods() { RemoveCgroups("kubepods") }

// RemoveCgroups removes cgroup name (a cgroupfs path) from every
// hierarchy, with the cgroups below it, deepest first.
func RemoveCgroups(name string) {
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", name))
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
				log.Printf("cleanup: rmdir %s: %v", d, err)
			}
		}
	}
}

// What the upstream kubelet leaves on the host outside its root dir:
// iptables chains (KUBE-FIREWALL with its INPUT/OUTPUT jumps,
// KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) in IPv4 and IPv6, and
// /var/lib/kubelet/device-plugins (a fixed path). hostState is what was
// there before the first agent, so only what the agents added goes.
type hostState struct {
	chains        map[string]bool // "iptables/filter/KUBE-FIREWALL"
	varLibKubelet bool
}

var iptTables = []string{"filter", "nat", "mangle"}

func iptChains(bin, table string) []string {
	out, err := Run(bin, "-w", "-t", table, "-S")
	if err != nil {
		return nil
	}
	var chains []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "-N" {
			chains = append(chains, f[1])
		}
	}
	return chains
}

func snapshotHost() hostState {
	s := hostState{chains: map[string]bool{}}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, t := range iptTables {
			for _, c := range iptChains(bin, t) {
				s.chains[bin+"/"+t+"/"+c] = true
			}
		}
	}
	_, err := os.Stat("/var/lib/kubelet")
	s.varLibKubelet = err == nil
	return s
}

// restoreHost removes the KUBE-* chains that were not there before (and the
// rules jumping to them), and /var/lib/kubelet if the agents created it.
func restoreHost(before hostState) {
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, t := range iptTables {
			added := map[string]bool{}
			for _, c := range iptChains(bin, t) {
				if strings.HasPrefix(c, "KUBE-") && !before.chains[bin+"/"+t+"/"+c] {
					added[c] = true
				}
			}
			if len(added) == 0 {
				continue
			}
			out, _ := Run(bin, "-w", "-t", t, "-S")
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) < 2 || f[0] != "-A" || added[f[1]] {
					continue
				}
				for i := range f {
					if f[i] == "-j" && i+1 < len(f) && added[f[i+1]] {
						args := append([]string{"-w", "-t", t, "-D"}, f[1:]...)
						if _, err := Run(bin, args...); err != nil {
							log.Printf("cleanup: %v", err)
						}
						break
					}
				}
			}
			for c := range added {
				_, _ = Run(bin, "-w", "-t", t, "-F", c)
			}
			for c := range added {
				if _, err := Run(bin, "-w", "-t", t, "-X", c); err != nil {
					log.Printf("cleanup: %v", err)
				}
			}
			log.Printf("cleanup: removed %d %s chains from table %s", len(added), bin, t)
		}
	}
	if !before.varLibKubelet {
		if err := os.RemoveAll("/var/lib/kubelet"); err != nil {
			log.Printf("cleanup: %v", err)
		}
	}
}
