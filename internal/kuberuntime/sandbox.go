package kuberuntime

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNSConfig is the node's DNS setup that pod resolvers derive from.
type DNSConfig struct {
	// ResolvConf is the host resolver file used for dnsPolicy Default (and
	// ClusterFirst without cluster DNS); empty means none.
	ResolvConf    string
	ClusterDNS    []string
	ClusterDomain string
}

// PodCgroups creates the pod-level cgroup (internal/cgroups).
type PodCgroups interface {
	// EnsurePod creates the pod's cgroup with its pod-level limits and
	// returns its name for the runtime (the sandbox's CgroupParent).
	EnsurePod(ctx context.Context, pod *v1.Pod) (string, error)
}

func (m *Manager) sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dns, err := podDNS(pod, m.cfg.DNS)
	if err != nil {
		return nil, err
	}
	nsOpts, err := m.namespaceOptions(ctx, pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       sandboxLabels(pod),
		Annotations:  sandboxAnnotations(pod),
		LogDirectory: PodLogDir(m.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID),
		DnsConfig:    dns,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: nsOpts,
				Privileged:       anyPrivileged(pod),
			},
		},
	}
	if m.cfg.PodCgroups != nil {
		parent, err := m.cfg.PodCgroups.EnsurePod(ctx, pod)
		if err != nil {
			return nil, fmt.Errorf("failed to ensure that the pod %s/%s cgroups exist and are correctly applied: %w", pod.Namespace, pod.Name, err)
		}
		cfg.Linux.CgroupParent = parent
	}
	if !pod.Spec.HostNetwork {
		host, _, err := hostnameAndDomain(pod, m.cfg.DNS.ClusterDomain)
		if err != nil {
			return nil, err
		}
		cfg.Hostname = host
	}
	// As upstream: the sandbox (its pause process) always runs with the
	// runtime's default profile, whatever the pod asks of its containers
	// (kubernetes#84623).
	cfg.Linux.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	if sc := pod.Spec.SecurityContext; sc != nil {
		if len(sc.Sysctls) > 0 {
			cfg.Linux.Sysctls = map[string]string{}
			for _, s := range sc.Sysctls {
				cfg.Linux.Sysctls[s.Name] = s.Value
			}
		}
		ssc := cfg.Linux.SecurityContext
		if sc.RunAsUser != nil {
			ssc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			ssc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		ssc.SupplementalGroups = sc.SupplementalGroups
		policy, err := supplementalGroupsPolicy(sc)
		if err != nil {
			return nil, err
		}
		ssc.SupplementalGroupsPolicy = policy
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
					Protocol:      toProtocol(p.Protocol),
					ContainerPort: p.ContainerPort,
					HostPort:      p.HostPort,
					HostIp:        p.HostIP,
				})
			}
		}
	}
	return cfg, nil
}

func toProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	default:
		return runtimeapi.Protocol_TCP
	}
}

// namespaceOptions are the pod's namespaces with its user namespace: the
// node's, or (hostUsers: false) the pod's own with the IDs allocated to it,
// as upstream's NamespacesForPod.
func (m *Manager) namespaceOptions(ctx context.Context, pod *v1.Pod) (*runtimeapi.NamespaceOption, error) {
	o := namespaceOptions(pod)
	if m.cfg.UserNamespaces == nil {
		if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
			return nil, fmt.Errorf("can't set `spec.hostUsers: false`: user namespaces are not available")
		}
		return o, nil
	}
	// The handler matters only for a pod of its own user namespace (its
	// support is checked): no RuntimeClass lookup on every sync otherwise.
	handler := ""
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		var err error
		if handler, err = m.runtimeHandler(ctx, pod); err != nil {
			return nil, err
		}
	}
	var err error
	if o.UsernsOptions, err = m.cfg.UserNamespaces.GetOrCreateUserNamespaceMappings(ctx, pod, handler); err != nil {
		return nil, err
	}
	return o, nil
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		o.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	return o
}

func anyPrivileged(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return true
			}
		}
	}
	return false
}

// podHostname is the pod's hostname as upstream: spec.hostname or the pod
// name, cut to 63 characters without a trailing '-' or '.'.
func podHostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	return truncateHostname(h)
}

// truncateHostname cuts h to 63 characters without a trailing '-' or '.'.
func truncateHostname(h string) string {
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// podDNS computes the pod's resolver configuration as upstream does for
// each dnsPolicy, then merges spec.dnsConfig.
func podDNS(pod *v1.Pod, node DNSConfig) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	switch {
	case policy == v1.DNSClusterFirstWithHostNet:
		policy = v1.DNSClusterFirst
	case policy == v1.DNSClusterFirst && pod.Spec.HostNetwork:
		// Host-network pods use the node's resolver unless they ask for
		// ClusterFirstWithHostNet.
		policy = v1.DNSDefault
	}
	if policy == v1.DNSClusterFirst && len(node.ClusterDNS) == 0 {
		policy = v1.DNSDefault
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSNone:
	case v1.DNSClusterFirst:
		cfg.Servers = append([]string(nil), node.ClusterDNS...)
		if d := node.ClusterDomain; d != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		}
		host, err := readResolvConf(node.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg.Searches = append(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	default: // Default
		host, err := readResolvConf(node.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg = host
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = appendUnique(cfg.Servers, dc.Nameservers...)
		cfg.Searches = appendUnique(cfg.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOption(cfg.Options, o.Name, opt)
		}
	}
	return cfg, nil
}

func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if path == "" {
		return cfg, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("resolv.conf for pod DNS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) > 1 {
				cfg.Servers = append(cfg.Servers, fields[1])
			}
		case "search":
			cfg.Searches = fields[1:]
		case "options":
			cfg.Options = append(cfg.Options, fields[1:]...)
		}
	}
	return cfg, sc.Err()
}

func appendUnique(list []string, more ...string) []string {
	for _, s := range more {
		found := false
		for _, x := range list {
			if x == s {
				found = true
				break
			}
		}
		if !found {
			list = append(list, s)
		}
	}
	return list
}

func mergeOption(opts []string, name, opt string) []string {
	for i, o := range opts {
		if o == name || strings.HasPrefix(o, name+":") {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}
