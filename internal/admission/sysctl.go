package admission

import (
	"context"
	"fmt"
	"strings"

	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// SysctlForbidden is the rejection reason of a pod asking for a sysctl the
// node does not allow, as upstream.
const SysctlForbidden = "SysctlForbidden"

// safeSysctls are upstream's safe sysctls (pkg/kubelet/sysctl), all
// namespaced on the kernels nodelet supports (5.15 and later).
var safeSysctls = []string{
	"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat",
}

// Sysctls is the node's sysctl allowlist: the safe sysctls and the
// allowedUnsafeSysctls of the KubeletConfiguration (names, or prefixes
// ending in "*"), each with its kernel namespace.
type Sysctls struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// NewSysctls returns the allowlist of the safe sysctls and unsafe; a
// pattern that is not a namespaced sysctl is an error, as upstream.
func NewSysctls(unsafe []string) (*Sysctls, error) {
	s := &Sysctls{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(append([]string{}, safeSysctls...), unsafe...) {
		ns, name, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", name)
		}
		if prefixed {
			s.prefixes[name] = ns
		} else {
			s.names[name] = ns
		}
	}
	return s, nil
}

// Admit rejects a pod with a sysctl that is not allowlisted, or whose
// namespace the pod shares with the host.
func (s *Sysctls) Admit(_ context.Context, a Attributes) Result {
	pod := a.Pod
	if pod.Spec.SecurityContext == nil || len(pod.Spec.SecurityContext.Sysctls) == 0 {
		return Result{Admit: true}
	}
	hostUsers := pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
	for _, sc := range pod.Spec.SecurityContext.Sysctls {
		if err := s.check(sc.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC, hostUsers); err != nil {
			return reject(SysctlForbidden, "forbidden sysctl: %v", err)
		}
	}
	return Result{Admit: true}
}

func (s *Sysctls) check(name string, hostNet, hostIPC, hostUsers bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, found := s.names[name]
	if !found {
		for p, pns := range s.prefixes {
			if strings.HasPrefix(name, p) {
				ns, found = pns, true
				break
			}
		}
	}
	if !found {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) ||
		(ns == utilsysctl.UserNamespace && hostUsers) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
