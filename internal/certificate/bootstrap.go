package certificate

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// tmpPrivateKeyFile holds the key of a CSR not yet issued, so a restart
// reuses it (upstream's name).
const tmpPrivateKeyFile = "kubelet-client.key.tmp"

// ClientStoreName and ServerStoreName are the certificate stores' file
// prefixes in the cert dir (kubelet-client-current.pem, ...).
const (
	ClientStoreName = "kubelet-client"
	ServerStoreName = "kubelet-server"
)

// CSRWaitTimeout is how long a bootstrap CSR may wait to be issued.
const CSRWaitTimeout = time.Hour

// LoadClientConfig is the start of client rotation with a bootstrap
// kubeconfig, as upstream: a valid kubeconfig is used as it is; otherwise
// the kubeconfig is (re)written to point at the cert store's current
// certificate, certConfig is the bootstrap credentials (to request the
// first certificate with) and userConfig the rewritten kubeconfig's. Without
// a bootstrap kubeconfig both are the kubeconfig's.
func LoadClientConfig(logger klog.Logger, kubeconfigPath, bootstrapPath, certDir string) (certConfig, userConfig *rest.Config, err error) {
	if bootstrapPath == "" {
		c, err := loadRESTClientConfig(kubeconfigPath)
		if err != nil {
			return nil, nil, fmt.Errorf("unable to load kubeconfig: %w", err)
		}
		return c, rest.CopyConfig(c), nil
	}
	store, err := certificate.NewFileStore(ClientStoreName, certDir, certDir, "", "")
	if err != nil {
		return nil, nil, fmt.Errorf("unable to build bootstrap cert store: %w", err)
	}
	if ok, err := ClientConfigValid(logger, kubeconfigPath); err != nil {
		return nil, nil, err
	} else if ok {
		c, err := loadRESTClientConfig(kubeconfigPath)
		if err != nil {
			return nil, nil, fmt.Errorf("unable to load kubeconfig: %w", err)
		}
		logger.V(2).Info("Current kubeconfig file contents are still valid, no bootstrap necessary")
		return c, rest.CopyConfig(c), nil
	}
	bootstrap, err := loadRESTClientConfig(bootstrapPath)
	if err != nil {
		return nil, nil, fmt.Errorf("unable to load bootstrap kubeconfig: %w", err)
	}
	c := rest.AnonymousClientConfig(bootstrap)
	pem := store.CurrentPath()
	c.KeyFile, c.CertFile = pem, pem
	if err := writeKubeconfig(c, kubeconfigPath, pem); err != nil {
		return nil, nil, err
	}
	logger.Info("Using the bootstrap credentials to request a client certificate; the kubeconfig points to the cert dir", "kubeconfig", kubeconfigPath, "certDir", certDir)
	return bootstrap, c, nil
}

// LoadClientCert requests a client certificate with the bootstrap
// kubeconfig unless kubeconfigPath holds a valid one, waits for it to be
// issued, stores it in certDir and writes kubeconfigPath pointing at it,
// as upstream's bootstrap without rotation.
func LoadClientCert(ctx context.Context, kubeconfigPath, bootstrapPath, certDir string, nodeName types.NodeName) error {
	logger := klog.FromContext(ctx)
	if ok, err := ClientConfigValid(logger, kubeconfigPath); err != nil {
		return err
	} else if ok {
		logger.V(2).Info("Kubeconfig exists and is valid, skipping bootstrap", "path", kubeconfigPath)
		return nil
	}
	logger.Info("Using the bootstrap kubeconfig to request a client certificate", "bootstrapKubeconfig", bootstrapPath)
	bootstrap, err := loadRESTClientConfig(bootstrapPath)
	if err != nil {
		return fmt.Errorf("unable to load bootstrap kubeconfig: %w", err)
	}
	client, err := NewCertificatesClient(bootstrap)
	if err != nil {
		return fmt.Errorf("unable to create certificates signing request client: %w", err)
	}
	store, err := certificate.NewFileStore(ClientStoreName, certDir, certDir, "", "")
	if err != nil {
		return fmt.Errorf("unable to build bootstrap cert store: %w", err)
	}
	var keyData []byte
	if cert, err := store.Current(); err == nil && cert.PrivateKey != nil {
		if keyData, err = keyutil.MarshalPrivateKeyToPEM(cert.PrivateKey); err != nil {
			keyData = nil
		}
	}
	// The key waits in a file of its own until the CSR is issued (the
	// store's current path is a symlink it manages).
	keyPath := filepath.Join(certDir, tmpPrivateKeyFile)
	if !validKey(keyData) {
		if keyData, _, err = keyutil.LoadOrGenerateKeyFile(keyPath); err != nil {
			return err
		}
	}
	certData, err := requestNodeCertificate(ctx, client, keyData, nodeName)
	if err != nil {
		return err
	}
	if _, err := store.Update(certData, keyData); err != nil {
		return err
	}
	if err := os.Remove(keyPath); err != nil && !os.IsNotExist(err) {
		logger.V(2).Info("Failed cleaning up private key file", "path", keyPath, "err", err)
	}
	logger.Info("Client certificate issued", "path", store.CurrentPath())
	return writeKubeconfig(bootstrap, kubeconfigPath, store.CurrentPath())
}

// ClientConfigValid tells whether kubeconfigPath exists with a client
// certificate that loads and has not expired; an error only when the
// file cannot be looked at.
func ClientConfigValid(logger klog.Logger, kubeconfigPath string) (bool, error) {
	if _, err := os.Stat(kubeconfigPath); os.IsNotExist(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("error reading existing kubeconfig %s: %w", kubeconfigPath, err)
	}
	invalid := func(what string, err error) (bool, error) {
		logger.Info("The kubeconfig's client certificate cannot be used: bootstrapping", "kubeconfig", kubeconfigPath, "reason", what, "err", err)
		return false, nil
	}
	c, err := loadRESTClientConfig(kubeconfigPath)
	if err != nil {
		return invalid("unreadable kubeconfig", err)
	}
	tc, err := c.TransportConfig()
	if err != nil {
		return invalid("no transport configuration", err)
	}
	// Loads the certificate files into tc.TLS.
	if _, err := transport.TLSConfigFor(tc); err != nil {
		return invalid("no TLS configuration", err)
	}
	certs, err := certutil.ParseCertsPEM(tc.TLS.CertData)
	if err != nil || len(certs) == 0 {
		return invalid("no client certificate", err)
	}
	now := time.Now()
	for _, cert := range certs {
		if now.After(cert.NotAfter) {
			return invalid("expired", fmt.Errorf("the client certificate expired at %v", cert.NotAfter))
		}
	}
	return true, nil
}

func validKey(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	_, err := keyutil.ParsePrivateKeyPEM(data)
	return err == nil
}

// requestNodeCertificate sends the node's client CSR and waits for the
// certificate.
func requestNodeCertificate(ctx context.Context, client kubernetes.Interface, keyData []byte, nodeName types.NodeName) ([]byte, error) {
	subject := &pkix.Name{Organization: []string{"system:nodes"}, CommonName: "system:node:" + string(nodeName)}
	key, err := keyutil.ParsePrivateKeyPEM(keyData)
	if err != nil {
		return nil, fmt.Errorf("invalid private key for certificate request: %w", err)
	}
	csrData, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("unable to generate certificate request: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if _, ok := key.(*rsa.PrivateKey); ok {
		usages = append(usages, certificatesv1.UsageKeyEncipherment)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key does not implement crypto.Signer")
	}
	name, err := digestedName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := csr.RequestCertificate(client, csrData, name, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, CSRWaitTimeout)
	defer cancel()
	klog.FromContext(ctx).Info("Waiting for the client certificate to be issued", "csr", reqName)
	return csr.WaitForCertificate(ctx, client, reqName, reqUID)
}

// digestedName is the CSR's name from what it asks for, as upstream's
// (node-csr-<hash>): the same key and subject give the same name, so a
// restart finds its pending request again.
func digestedName(publicKey any, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	hash := sha512.New512_256()
	// A delimiter outside base64url's alphabet: two inputs cannot write the
	// same stream.
	const delimiter = '|'
	write := func(data []byte) {
		hash.Write([]byte(base64.RawURLEncoding.EncodeToString(data)))
		hash.Write([]byte{delimiter})
	}
	der, err := x509.MarshalPKIXPublicKey(publicKey)
	if err != nil {
		return "", err
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, v := range subject.Organization {
		write([]byte(v))
	}
	for _, v := range usages {
		write([]byte(v))
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(hash.Sum(nil)), nil
}

// writeKubeconfig writes the kubeconfig of the bootstrap's cluster with
// the client certificate and key in pemPath.
func writeKubeconfig(c *rest.Config, kubeconfigPath, pemPath string) error {
	caFile, caData := c.CAFile, []byte(nil)
	if caFile == "" {
		caData = c.CAData
	}
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server: c.Host, InsecureSkipTLSVerify: c.Insecure, CertificateAuthority: caFile, CertificateAuthorityData: caData,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfigPath), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(cfg, kubeconfigPath)
}

func loadRESTClientConfig(path string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	loaded, err := rules.Load()
	if err != nil {
		return nil, err
	}
	return clientcmd.NewNonInteractiveClientConfig(*loaded, loaded.CurrentContext, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
}
