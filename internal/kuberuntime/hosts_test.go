package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestHostnameAndEtcHosts(t *testing.T) {
	hostFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostFile, []byte("127.0.0.1 localhost\n10.0.0.5 node1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := func(mut func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	cases := []struct {
		name         string
		pod          *v1.Pod
		host, domain string
		contains     []string
		absent       []string
		err          bool
	}{
		{name: "plain", pod: pod(nil), host: "web-0",
			contains: []string{"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n", "10.88.0.7\tweb-0\n"}},
		{name: "hostname and subdomain", pod: pod(func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "db", "backend" }),
			host: "db", domain: "backend.shop.svc.cluster.local",
			contains: []string{"10.88.0.7\tdb.backend.shop.svc.cluster.local\tdb\n"}},
		{name: "FQDN as hostname", pod: pod(func(p *v1.Pod) {
			p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "backend", ptr.To(true)
		}), host: "web-0.backend.shop.svc.cluster.local", domain: "backend.shop.svc.cluster.local",
			contains: []string{"10.88.0.7\tweb-0.backend.shop.svc.cluster.local\tweb-0\n"}},
		{name: "FQDN too long", pod: pod(func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "backend", ptr.To(true)
		}), err: true},
		{name: "hostnameOverride wins over hostname and subdomain", pod: pod(func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostnameOverride = "db", "backend", ptr.To("my.host-name")
		}), host: "my.host-name", contains: []string{"10.88.0.7\tmy.host-name\n"}},
		{name: "hostnameOverride not a DNS subdomain", pod: pod(func(p *v1.Pod) { p.Spec.HostnameOverride = ptr.To("Bad_Name") }), err: true},
		{name: "host aliases", pod: pod(func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo.local", "bar.local"}}}
		}), host: "web-0", contains: []string{"\n# Entries added by HostAliases.\n1.2.3.4\tfoo.local\tbar.local\n"}},
		{name: "host network keeps the node's file", pod: pod(func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.HostAliases = []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo"}}}
		}), host: "web-0", contains: []string{"(host network)", "10.0.0.5 node1\n", "1.2.3.4\tfoo\n"}, absent: []string{"10.88.0.7"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host, domain, err := hostnameAndDomain(tc.pod, "cluster.local")
			if (err != nil) != tc.err {
				t.Fatalf("error %v", err)
			}
			if err != nil {
				return
			}
			if host != tc.host || domain != tc.domain {
				t.Fatalf("hostname %q domain %q", host, domain)
			}
			ips := []string{"10.88.0.7"}
			if tc.pod.Spec.HostNetwork {
				ips = nil
			}
			data, err := etcHosts(tc.pod, ips, host, domain, hostFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(string(data), s) {
					t.Errorf("missing %q in:\n%s", s, data)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(string(data), s) {
					t.Errorf("unexpected %q in:\n%s", s, data)
				}
			}
		})
	}
}
