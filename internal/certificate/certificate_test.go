package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func TestSANs(t *testing.T) {
	dns, ips := SANs([]v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.2"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: v1.NodeExternalIP, Address: "10.0.0.1"},
		{Type: v1.NodeHostName, Address: "node-b"},
		{Type: v1.NodeHostName, Address: "192.168.1.1"},
		{Type: v1.NodeInternalDNS, Address: "node-a.local"},
		{Type: v1.NodeExternalIP, Address: "not-an-ip"},
		{Type: v1.NodeInternalIP, Address: ""},
	})
	if strings.Join(dns, ",") != "node-a.local,node-b" {
		t.Errorf("DNS names %v", dns)
	}
	var got []string
	for _, ip := range ips {
		got = append(got, ip.String())
	}
	if strings.Join(got, ",") != "10.0.0.1,10.0.0.2,192.168.1.1" {
		t.Errorf("IPs %v", got)
	}
}

func TestDigestedName(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	subj := &pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	a, _ := digestedName(key.Public(), subj, usages)
	b, _ := digestedName(key.Public(), subj, usages)
	c, _ := digestedName(other.Public(), subj, usages)
	d, _ := digestedName(key.Public(), &pkix.Name{CommonName: "system:node:b", Organization: []string{"system:nodes"}}, usages)
	if a != b || a == c || a == d || !strings.HasPrefix(a, "node-csr-") {
		t.Errorf("names %q %q %q %q", a, b, c, d)
	}
}

// selfSigned is a certificate and key valid from notBefore to notAfter.
func selfSigned(t *testing.T, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

func TestClientConfigValid(t *testing.T) {
	dir := t.TempDir()
	logger := klog.Background()
	write := func(name string, cert, key []byte) string {
		path := filepath.Join(dir, name)
		cfg := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CertData: cert, KeyData: key}}
		if err := writeKubeconfig(cfg, path, ""); err != nil {
			t.Fatal(err)
		}
		// writeKubeconfig points at files; embed the data instead.
		kc, _ := clientcmd.LoadFromFile(path)
		for _, a := range kc.AuthInfos {
			a.ClientCertificate, a.ClientKey = "", ""
			a.ClientCertificateData, a.ClientKeyData = cert, key
		}
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	now := time.Now()
	validCert, validKey := selfSigned(t, "valid", now.Add(-time.Hour), now.Add(time.Hour))
	expiredCert, expiredKey := selfSigned(t, "expired", now.Add(-2*time.Hour), now.Add(-time.Hour))
	for _, tc := range []struct {
		name string
		path string
		want bool
	}{
		{"missing", filepath.Join(dir, "none"), false},
		{"valid", write("valid", validCert, validKey), true},
		{"expired", write("expired", expiredCert, expiredKey), false},
		{"no certificate", write("nocert", nil, nil), false},
	} {
		got, err := ClientConfigValid(logger, tc.path)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	garbage := filepath.Join(dir, "garbage")
	_ = os.WriteFile(garbage, []byte("{{{"), 0o600)
	if ok, err := ClientConfigValid(logger, garbage); ok || err != nil {
		t.Errorf("garbage: %v %v", ok, err)
	}
}

func TestWriteKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "kubeconfig")
	if err := writeKubeconfig(&rest.Config{Host: "https://api:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: "/ca.crt"}}, path, "/pki/kubelet-client-current.pem"); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if kc.Clusters[ctx.Cluster].Server != "https://api:6443" || kc.Clusters[ctx.Cluster].CertificateAuthority != "/ca.crt" ||
		kc.AuthInfos[ctx.AuthInfo].ClientCertificate != "/pki/kubelet-client-current.pem" || kc.AuthInfos[ctx.AuthInfo].ClientKey != "/pki/kubelet-client-current.pem" {
		t.Errorf("kubeconfig %+v", kc)
	}
}

// fakeManager is a certificate.Manager whose current certificate the test
// sets.
type fakeManager struct {
	mu  sync.Mutex
	cur *tls.Certificate
}

func (f *fakeManager) Start()              {}
func (f *fakeManager) Stop()               {}
func (f *fakeManager) ServerHealthy() bool { return true }
func (f *fakeManager) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}
func (f *fakeManager) set(c *tls.Certificate) { f.mu.Lock(); f.cur = c; f.mu.Unlock() }

// The rotating transport presents the manager's certificate and closes its
// connections when the manager has a new one.
func TestUpdateTransport(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{}, 10)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 1)
				_, _ = conn.Read(buf) // returns once the client closes
				closed <- struct{}{}
				conn.Close()
			}()
		}
	}()
	certPEM, keyPEM := selfSigned(t, "a", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	first, _ := tls.X509KeyPair(certPEM, keyPEM)
	m := &fakeManager{cur: &first}
	c := &rest.Config{Host: "https://" + ln.Addr().String()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = updateTransport(ctx, 10*time.Millisecond, c, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Transport == nil || c.CertData != nil || c.CertFile != "" {
		t.Fatalf("config not switched to the transport: %+v", c)
	}
	if _, err := updateTransport(ctx, time.Second, c, m); err == nil {
		t.Error("a second transport on the same config: no error")
	}
	// A connection through the rotating dialer, then a new certificate.
	conn, err := c.Transport.(*http.Transport).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	second, _ := tls.X509KeyPair(certPEM, keyPEM)
	m.set(&second)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed after the rotation")
	}
}
