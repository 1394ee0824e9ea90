package kuberuntime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostnameAndDomain is the pod's hostname and domain as upstream computes
// them: spec.hostname or the name (cut to 63 characters), and, with a
// subdomain, <subdomain>.<namespace>.svc.<clusterDomain>. With
// setHostnameAsFQDN the hostname is the fully qualified name (at most 64
// characters).
// spec.hostnameOverride, when set, is the hostname (cut to 63 characters),
// with no domain.
func hostnameAndDomain(pod *v1.Pod, clusterDomain string) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		return truncateHostname(*o), "", nil
	}
	host := podHostname(pod)
	domain := ""
	if pod.Spec.Subdomain != "" && clusterDomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
		fqdn := host + "." + domain
		if len(fqdn) > 64 {
			return "", "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (64 characters is the max, %d characters requested)", fqdn, len(fqdn))
		}
		return fqdn, domain, nil
	}
	return host, domain, nil
}

const managedHostsHeader = "# Kubernetes-managed hosts file.\n"

// etcHosts is the content nodelet writes to a pod's /etc/hosts, as upstream:
// the loopback entries, the pod's IPs with its hostname (and FQDN), then
// the hostAliases. Host-network pods get the node's /etc/hosts and the
// aliases.
func etcHosts(pod *v1.Pod, podIPs []string, hostname, domain, hostFile string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		data, err := os.ReadFile(hostFile)
		if err != nil {
			return nil, err
		}
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(data)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				// The hostname may be the FQDN (setHostnameAsFQDN).
				short := strings.SplitN(hostname, ".", 2)[0]
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, short, domain, short)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}

// etcHostsMount writes the pod's hosts file (<pod dir>/etc-hosts) and
// returns its mount at /etc/hosts, or nil when the pod has no IP yet (the
// runtime's file stays).
func (m *Manager) etcHostsMount(pod *v1.Pod, podIPs []string) (*runtimeapi.Mount, error) {
	if len(podIPs) == 0 && !pod.Spec.HostNetwork {
		return nil, nil
	}
	hostname, domain, err := hostnameAndDomain(pod, m.cfg.DNS.ClusterDomain)
	if err != nil {
		return nil, err
	}
	data, err := etcHosts(pod, podIPs, hostname, domain, "/etc/hosts")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(m.cfg.PodsDir, string(pod.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "etc-hosts")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: path}, nil
}
