package certificate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// RotationCheckPeriod is how often the transport looks for a new client
// certificate (upstream's).
const RotationCheckPeriod = 10 * time.Second

// UpdateTransport gives c (anonymous: no credentials of its own) a
// transport presenting the manager's current client certificate; when the
// manager has a new one, every connection is closed, so requests and
// watches resume with it. It returns a function closing all connections.
// (Upstream also exits after five minutes without a usable certificate, to
// be restarted onto its bootstrap credentials; nodelet's client manager
// falls back to them itself: NewClientManager.)
func UpdateTransport(ctx context.Context, c *rest.Config, m certificate.Manager) (func(), error) {
	return updateTransport(ctx, RotationCheckPeriod, c, m)
}

func updateTransport(ctx context.Context, period time.Duration, c *rest.Config, m certificate.Manager) (func(), error) {
	if c.Transport != nil || c.Dial != nil {
		return nil, errors.New("there is already a transport or dialer configured")
	}
	logger := klog.FromContext(ctx)
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	tlsConfig, err := rest.TLSConfigFor(c)
	if err != nil {
		return nil, fmt.Errorf("unable to configure TLS for the rest client: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert := m.Current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil
	}
	var mu sync.Mutex
	last := m.Current()
	check := func() bool {
		mu.Lock()
		defer mu.Unlock()
		cur := m.Current()
		if cur == nil || cur == last {
			return cur != nil
		}
		last = cur
		logger.Info("Certificate rotation detected, shutting down client connections to start using new credentials")
		d.CloseAll()
		return true
	}
	go wait.UntilWithContext(ctx, func(context.Context) { check() }, period)
	if last == nil {
		// Faster until the first certificate is there.
		go func() {
			_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return check(), nil })
		}()
	}
	c.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport enforces TLS: the config's own options go.
	c.CertData, c.KeyData, c.CertFile, c.KeyFile = nil, nil, "", ""
	c.CAData, c.CAFile, c.Insecure, c.NextProtos = nil, "", false, nil
	return d.CloseAll, nil
}
