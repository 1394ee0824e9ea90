package certificate

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	netutils "k8s.io/utils/net"
)

// ClientConfig configures the client certificate's manager.
type ClientConfig struct {
	CertDir  string
	NodeName types.NodeName
	// CertConfig requests certificates while there is none (the bootstrap
	// credentials), UserConfig once there is one (the kubeconfig, pointing
	// at the store's current certificate or holding its own, which the
	// store starts from, as kubeadm's control-plane nodes have it).
	CertConfig, UserConfig *rest.Config
}

// NewClientManager is the manager rotating the node's client certificate
// (signer kubernetes.io/kube-apiserver-client-kubelet, CN
// system:node:<name>, O system:nodes) in the "kubelet-client" store of the
// cert dir.
func NewClientManager(c ClientConfig) (certificate.Manager, error) {
	if c.CertDir == "" || c.NodeName == "" || c.CertConfig == nil || c.UserConfig == nil {
		return nil, errors.New("certificate: ClientConfig needs CertDir, NodeName, CertConfig and UserConfig")
	}
	store, err := certificate.NewFileStore(ClientStoreName, c.CertDir, c.CertDir, c.UserConfig.CertFile, c.UserConfig.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("failed to initialize client certificate store: %w", err)
	}
	clientsetFn := func(current *tls.Certificate) (kubernetes.Interface, error) {
		// With a certificate still valid the node renews itself; without
		// one, or with an expired one (which the API server refuses:
		// upstream #65991), the bootstrap credentials ask.
		cfg := c.CertConfig
		if current != nil && (current.Leaf == nil || time.Now().Before(current.Leaf.NotAfter)) {
			cfg = c.UserConfig
		}
		return NewCertificatesClient(cfg)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: clientsetFn,
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + string(c.NodeName), Organization: []string{"system:nodes"},
		}},
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:               certificate.DefaultKubeletClientGetUsages,
		BootstrapCertificatePEM: c.UserConfig.CertData,
		BootstrapKeyPEM:         c.UserConfig.KeyData,
		CertificateStore:        store,
		Name:                    "kubelet-client",
	})
	if err != nil {
		return nil, fmt.Errorf("failed to initialize client certificate manager: %w", err)
	}
	return m, nil
}

// ServingConfig configures the serving certificate's manager.
type ServingConfig struct {
	Client   kubernetes.Interface
	CertDir  string
	NodeName types.NodeName
	// Addresses are the node's addresses: the certificate's SANs.
	Addresses func() []v1.NodeAddress
	// TLSCertFile and TLSPrivateKeyFile, when set, are what the store
	// starts from (tlsCertFile, tlsPrivateKeyFile).
	TLSCertFile, TLSPrivateKeyFile string
}

// NewServingManager is the manager of the serving certificate (signer
// kubernetes.io/kubelet-serving, the node's addresses as SANs: no request
// before the node has an IP) in the "kubelet-server" store of the cert dir.
func NewServingManager(c ServingConfig) (certificate.Manager, error) {
	if c.Client == nil || c.CertDir == "" || c.NodeName == "" || c.Addresses == nil {
		return nil, errors.New("certificate: ServingConfig needs Client, CertDir, NodeName and Addresses")
	}
	store, err := certificate.NewFileStore(ServerStoreName, c.CertDir, c.CertDir, c.TLSCertFile, c.TLSPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("failed to initialize server certificate store: %w", err)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return c.Client, nil },
		GetTemplate: func() *x509.CertificateRequest {
			hostnames, ips := SANs(c.Addresses())
			if len(ips) == 0 {
				return nil
			}
			return &x509.CertificateRequest{
				Subject:     pkix.Name{CommonName: "system:node:" + string(c.NodeName), Organization: []string{"system:nodes"}},
				DNSNames:    hostnames,
				IPAddresses: ips,
			}
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "kubelet-serving",
	})
	if err != nil {
		return nil, fmt.Errorf("failed to initialize server certificate manager: %w", err)
	}
	return m, nil
}

// SANs are the DNS names and IPs of the node's addresses, sorted and
// without duplicates, as upstream's serving CSR has them: a Hostname that
// parses as an IP counts as one.
func SANs(addrs []v1.NodeAddress) (dnsNames []string, ips []net.IP) {
	seenDNS, seenIP := map[string]bool{}, map[string]bool{}
	for _, a := range addrs {
		if a.Address == "" {
			continue
		}
		ip := netutils.ParseIPSloppy(a.Address)
		switch a.Type {
		case v1.NodeHostName:
			if ip != nil {
				seenIP[ip.String()] = true
			} else {
				seenDNS[a.Address] = true
			}
		case v1.NodeInternalIP, v1.NodeExternalIP:
			if ip != nil {
				seenIP[ip.String()] = true
			}
		case v1.NodeInternalDNS, v1.NodeExternalDNS:
			seenDNS[a.Address] = true
		}
	}
	for n := range seenDNS {
		dnsNames = append(dnsNames, n)
	}
	var ipStrs []string
	for s := range seenIP {
		ipStrs = append(ipStrs, s)
	}
	slices.Sort(dnsNames)
	slices.Sort(ipStrs)
	for _, s := range ipStrs {
		ips = append(ips, netutils.ParseIPSloppy(s))
	}
	return dnsNames, ips
}
