package main

import (
	"log"
	"os"
	"strings"
)

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
	out, err := run(bin, "-w", "-t", table, "-S")
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
			out, _ := run(bin, "-w", "-t", t, "-S")
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) < 2 || f[0] != "-A" || added[f[1]] {
					continue
				}
				for i := range f {
					if f[i] == "-j" && i+1 < len(f) && added[f[i+1]] {
						args := append([]string{"-w", "-t", t, "-D"}, f[1:]...)
						if _, err := run(bin, args...); err != nil {
							log.Printf("cleanup: %v", err)
						}
						break
					}
				}
			}
			for c := range added {
				_, _ = run(bin, "-w", "-t", t, "-F", c)
			}
			for c := range added {
				if _, err := run(bin, "-w", "-t", t, "-X", c); err != nil {
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
