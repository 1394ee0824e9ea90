package apiclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcertificate "k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/certificate"
)

// Config is how nodelet reaches the API server.
type Config struct {
	// KubeconfigPath (--kubeconfig), NodeName and CertDir (--cert-dir)
	// are required.
	KubeconfigPath, NodeName, CertDir string
	// BootstrapKubeconfig (--bootstrap-kubeconfig), when set, is what
	// gets the kubeconfig a client certificate (TLS bootstrap).
	BootstrapKubeconfig string
	// RotateCertificates (rotateCertificates): the client certificate
	// comes from a manager renewing it (bootstrapping in the background
	// when there is none yet).
	RotateCertificates bool
	// QPS and Burst limit the main client (kubeAPIQPS, kubeAPIBurst);
	// EventQPS and EventBurst the events client (eventRecordQPS, 0 being
	// no limit, and eventBurst).
	QPS        float32
	Burst      int
	EventQPS   float32
	EventBurst int
	// ContentType is the clients' (contentType; protobuf when empty).
	ContentType string
	// Wrap, when set, wraps the main client's transport (to follow
	// whether the API server answers: the offline state).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Clients are nodelet's API clients.
type Clients struct {
	// API is the main client: pods, the Node, statuses, tokens.
	API Interface
	// Events writes events with their own rate limit, so that a burst of
	// events never delays statuses, tokens or the lease.
	Events corev1.EventsGetter

	cfg Config
	// base is the clients' configuration before the rate limits.
	base *rest.Config
	// clientCerts rotates the client certificate (RotateCertificates);
	// nil otherwise. Run runs it.
	clientCerts clientcertificate.Manager
}

// New builds the clients. With BootstrapKubeconfig and without
// RotateCertificates it first waits for the client certificate to be
// issued (TLS bootstrap), as upstream.
func New(ctx context.Context, cfg Config) (*Clients, error) {
	switch {
	case cfg.KubeconfigPath == "":
		return nil, errors.New("apiclient: Config.KubeconfigPath is required")
	case cfg.NodeName == "":
		return nil, errors.New("apiclient: Config.NodeName is required")
	case cfg.CertDir == "":
		return nil, errors.New("apiclient: Config.CertDir is required")
	}
	c := &Clients{cfg: cfg}
	var err error
	if c.base, err = c.baseConfig(ctx); err != nil {
		return nil, err
	}
	main := rest.CopyConfig(c.base)
	if cfg.Wrap != nil {
		main.Wrap(cfg.Wrap)
	}
	if c.API, err = NewForConfig(c.limited(main, cfg.QPS, cfg.Burst)); err != nil {
		return nil, err
	}
	eventQPS := cfg.EventQPS
	if eventQPS == 0 {
		eventQPS = -1 // upstream: 0 means no limit
	}
	if c.Events, err = corev1.NewForConfig(c.limited(c.base, eventQPS, cfg.EventBurst)); err != nil {
		return nil, err
	}
	return c, nil
}

// limited is base with a rate limit, the content type and nodelet's user
// agent.
func (c *Clients) limited(base *rest.Config, qps float32, burst int) *rest.Config {
	rc := rest.CopyConfig(base)
	rc.QPS, rc.Burst = qps, burst
	rc.ContentType = c.cfg.ContentType
	if rc.ContentType == "" {
		rc.ContentType = "application/vnd.kubernetes.protobuf"
	}
	rc.AcceptContentTypes = rc.ContentType + ",application/json"
	rc.UserAgent = "nodelet/" + c.cfg.NodeName
	return rc
}

// baseConfig is upstream's buildKubeletClientConfig: with
// RotateCertificates the client certificate comes from a manager through a
// transport that follows its renewals; else BootstrapKubeconfig, when set,
// first gets the kubeconfig a client certificate.
func (c *Clients) baseConfig(ctx context.Context) (*rest.Config, error) {
	logger := klog.FromContext(ctx)
	node := types.NodeName(c.cfg.NodeName)
	if c.cfg.RotateCertificates {
		logger.Info("Client certificate rotation is on; bootstrapping in the background if needed")
		certConfig, userConfig, err := certificate.LoadClientConfig(logger, c.cfg.KubeconfigPath, c.cfg.BootstrapKubeconfig, c.cfg.CertDir)
		if err != nil {
			return nil, err
		}
		m, err := certificate.NewClientManager(certificate.ClientConfig{CertDir: c.cfg.CertDir, NodeName: node, CertConfig: certConfig, UserConfig: userConfig})
		if err != nil {
			return nil, err
		}
		tc := rest.AnonymousClientConfig(userConfig)
		if _, err := certificate.UpdateTransport(ctx, tc, m); err != nil {
			return nil, err
		}
		c.clientCerts = m
		return tc, nil
	}
	if c.cfg.BootstrapKubeconfig != "" {
		if err := certificate.LoadClientCert(ctx, c.cfg.KubeconfigPath, c.cfg.BootstrapKubeconfig, c.cfg.CertDir, node); err != nil {
			return nil, fmt.Errorf("TLS bootstrap: %w", err)
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.cfg.KubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.cfg.KubeconfigPath, err)
	}
	return rc, nil
}

// Run rotates the client certificate until ctx is done (with
// RotateCertificates; it returns at once otherwise).
func (c *Clients) Run(ctx context.Context) error {
	if c.clientCerts == nil {
		return nil
	}
	return runManager(ctx, c.clientCerts)
}

// runManager runs a certificate manager until ctx is done.
func runManager(ctx context.Context, m clientcertificate.Manager) error {
	m.Start()
	<-ctx.Done()
	m.Stop()
	return nil
}

// ServingConfig is the serving certificate's (serverTLSBootstrap).
type ServingConfig struct {
	// CertDir holds the certificate's store (--cert-dir). Required.
	CertDir string
	// Addresses are the node's addresses: the certificate's SANs.
	// Required.
	Addresses func() []v1.NodeAddress
	// TLSCertFile and TLSPrivateKeyFile, when set, are what the store
	// starts from (tlsCertFile, tlsPrivateKeyFile).
	TLSCertFile, TLSPrivateKeyFile string
}

// Serving is the kubelet API's serving certificate, requested from the
// API server (signer kubernetes.io/kubelet-serving) and renewed.
type Serving struct {
	m clientcertificate.Manager
}

// NewServing returns the serving certificate's manager on these clients'
// credentials. Run runs it.
func (c *Clients) NewServing(cfg ServingConfig) (*Serving, error) {
	client, err := certificate.NewCertificatesClient(c.base)
	if err != nil {
		return nil, err
	}
	m, err := certificate.NewServingManager(certificate.ServingConfig{
		Client: client, CertDir: cfg.CertDir, NodeName: types.NodeName(c.cfg.NodeName), Addresses: cfg.Addresses,
		TLSCertFile: cfg.TLSCertFile, TLSPrivateKeyFile: cfg.TLSPrivateKeyFile,
	})
	if err != nil {
		return nil, err
	}
	return &Serving{m: m}, nil
}

// Current is the certificate of a handshake; nil until the first one is
// issued.
func (s *Serving) Current() *tls.Certificate { return s.m.Current() }

// Run renews the certificate until ctx is done.
func (s *Serving) Run(ctx context.Context) error { return runManager(ctx, s.m) }
