// Command pki writes the certificates and kubeconfigs of the local control
// plane: a CA; the API server's serving certificate; client certificates for
// the admin, the controller manager, the scheduler and the API server's
// kubelet client; the service-account key pair; and, per node, a client
// certificate (system:node:<name>, system:nodes) and a serving certificate.
// Existing files are kept, so it is idempotent.
//
//	pki cluster --dir DIR
//	pki node --dir DIR --name NAME --ip IP
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const server = "https://127.0.0.1:6443"

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: pki cluster|node --dir DIR [--name NAME --ip IP]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "", "output directory")
	name := fs.String("name", "", "node name")
	ip := fs.String("ip", "", "node IP")
	_ = fs.Parse(os.Args[2:])
	if *dir == "" {
		log.Fatal("--dir is required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	ca, err := loadOrCreateCA(*dir)
	if err != nil {
		log.Fatal(err)
	}
	switch os.Args[1] {
	case "cluster":
		err = cluster(*dir, ca)
	case "node":
		if *name == "" || *ip == "" {
			log.Fatal("node needs --name and --ip")
		}
		err = node(*dir, ca, *name, *ip)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

func cluster(dir string, ca *authority) error {
	if err := issue(dir, "apiserver", ca, "kube-apiserver", nil, true,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}); err != nil {
		return err
	}
	clients := []struct{ file, cn, org string }{
		{"admin", "kubernetes-admin", "system:masters"},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		// The aggregation layer's proxy client (--proxy-client-cert-file):
		// the API server's requests to metrics-server carry it.
		{"front-proxy-client", "front-proxy-client", ""},
	}
	for _, c := range clients {
		var orgs []string
		if c.org != "" {
			orgs = []string{c.org}
		}
		if err := issue(dir, c.file, ca, c.cn, orgs, false, nil, nil); err != nil {
			return err
		}
		if c.file != "apiserver-kubelet-client" && c.file != "front-proxy-client" {
			if err := kubeconfig(dir, c.file, ca); err != nil {
				return err
			}
		}
	}
	return serviceAccountKey(dir)
}

func node(dir string, ca *authority, name, ip string) error {
	if err := issue(dir, "node-"+name, ca, "system:node:"+name, []string{"system:nodes"}, false, nil, nil); err != nil {
		return err
	}
	if err := kubeconfig(dir, "node-"+name, ca); err != nil {
		return err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	if p := net.ParseIP(ip); p != nil {
		ips = append(ips, p)
	}
	return issue(dir, "node-"+name+"-serving", ca, name, nil, true, []string{name, "localhost"}, ips)
}

func loadOrCreateCA(dir string) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, err
		}
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, errors.New("bad CA files")
		}
		cert, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, err
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, err
		}
		return &authority{cert, key, certPEM}, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nodelet-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeKey(keyPath, key); err != nil {
		return nil, err
	}
	return &authority{cert, key, certPEM}, os.WriteFile(certPath, certPEM, 0o644)
}

func issue(dir, name string, ca *authority, cn string, orgs []string, serving bool, dns []string, ips []net.IP) error {
	certPath := filepath.Join(dir, name+".crt")
	if _, err := os.Stat(certPath); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	if serving {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, name+".key"), key); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func serviceAccountKey(dir string) error {
	keyPath := filepath.Join(dir, "sa.key")
	if _, err := os.Stat(keyPath); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

func kubeconfig(dir, name string, ca *authority) error {
	crt, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: local
  context:
    cluster: local
    user: %s
current-context: local
`, server, b64(ca.pem), name, b64(crt), b64(key), name)
	return os.WriteFile(filepath.Join(dir, name+".kubeconfig"), []byte(content), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
