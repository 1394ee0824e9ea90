package nodelet

import (
	"context"
	"crypto/tls"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/certificate"
)

// clientConfig is the API clients' base configuration, as upstream's
// buildKubeletClientConfig: with rotateCertificates the client certificate
// comes from a certificate manager (bootstrapping in the background when
// there is none yet) through a transport that follows its renewals; else
// --bootstrap-kubeconfig, when given, first gets the kubeconfig a client
// certificate (waiting for it to be issued).
func (n *Nodelet) clientConfig(ctx context.Context) (*rest.Config, error) {
	o := n.opts
	logger := klog.FromContext(ctx)
	node := types.NodeName(o.NodeName)
	if o.Config.RotateCertificates {
		logger.Info("Client certificate rotation is on; bootstrapping in the background if needed")
		certConfig, userConfig, err := certificate.LoadClientConfig(logger, o.KubeconfigPath, o.BootstrapKubeconfig, o.CertDir)
		if err != nil {
			return nil, err
		}
		m, err := certificate.NewClientManager(certificate.ClientConfig{CertDir: o.CertDir, NodeName: node, CertConfig: certConfig, UserConfig: userConfig})
		if err != nil {
			return nil, err
		}
		tc := rest.AnonymousClientConfig(userConfig)
		if _, err := certificate.UpdateTransport(ctx, tc, m); err != nil {
			return nil, err
		}
		m.Start()
		n.clientCerts = m
		return tc, nil
	}
	if o.BootstrapKubeconfig != "" {
		if err := certificate.LoadClientCert(ctx, o.KubeconfigPath, o.BootstrapKubeconfig, o.CertDir, node); err != nil {
			return nil, fmt.Errorf("TLS bootstrap: %w", err)
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", o.KubeconfigPath, err)
	}
	return rc, nil
}

// servingCertificate starts the serving certificate's manager when
// serverTLSBootstrap is set (cluster mode): the kubelet API's certificate
// of each handshake. Nil otherwise.
func (n *Nodelet) servingCertificate() (func() *tls.Certificate, error) {
	if !n.opts.Config.ServerTLSBootstrap || n.restBase == nil {
		return nil, nil
	}
	client, err := certificate.NewCertificatesClient(n.restBase)
	if err != nil {
		return nil, err
	}
	m, err := certificate.NewServingManager(certificate.ServingConfig{
		Client: client, CertDir: n.opts.CertDir, NodeName: types.NodeName(n.opts.NodeName), Addresses: n.nodeAddresses,
		TLSCertFile: n.opts.Config.TLSCertFile, TLSPrivateKeyFile: n.opts.Config.TLSPrivateKeyFile,
	})
	if err != nil {
		return nil, err
	}
	m.Start()
	n.servingCerts = m
	return m.Current, nil
}

// nodeAddresses are the addresses the node reports (its IPs, its name).
func (n *Nodelet) nodeAddresses() []v1.NodeAddress {
	var out []v1.NodeAddress
	for _, ip := range n.hostIPs {
		out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: n.opts.NodeName})
}
