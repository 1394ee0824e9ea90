package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// approveServingCSRs approves the node's kubelet-serving CSRs until ctx
// ends (upstream never auto-approves them: an operator's controller does).
func approveServingCSRs(ctx context.Context, t *testing.T, c *framework.Cluster, node string) {
	for ctx.Err() == nil {
		list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range list.Items {
				csr := &list.Items[i]
				if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || csr.Spec.Username != "system:node:"+node || len(csr.Status.Conditions) > 0 {
					continue
				}
				csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
					Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "E2EApproved", Message: "approved by the e2e test",
				})
				if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
					t.Logf("approve %s: %v", csr.Name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// readCert is the first certificate of a PEM file (a store's .pem holds
// the certificate and its key).
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			t.Fatalf("%s: no certificate", path)
		}
		if b.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return cert
		}
	}
}

// kubeletAPIWorks runs kubectl logs and exec on the pod: the API server
// reaches nodelet through its serving certificate (verified against the
// cluster CA).
func kubeletAPIWorks(t *testing.T, c *framework.Cluster, ns, pod string) {
	t.Helper()
	if out, err := c.KubectlOut(t, 30*time.Second, "-n", ns, "logs", pod, "--tail=1"); err != nil || !strings.Contains(out, "tick") {
		t.Errorf("kubectl logs: %v: %q", err, out)
	}
	if out, err := c.KubectlOut(t, 30*time.Second, "-n", ns, "exec", pod, "--", "echo", "exec-ok"); err != nil || !strings.Contains(out, "exec-ok") {
		t.Errorf("kubectl exec: %v: %q", err, out)
	}
}

// TestTLSBootstrapAndRotation: a node joins with the bootstrap token alone
// (rotateCertificates, serverTLSBootstrap), as after kubeadm join: the
// client certificate is requested with the token and auto-approved, stored
// as kubelet-client-<timestamp>.pem behind kubelet-client-current.pem with
// the kubeconfig pointing at it; the serving certificate is requested with
// the node's IP and approved by the test; kubectl logs and exec go through
// it. The harness's certificates live 3 minutes
// (--cluster-signing-duration) and the signer backdates them 5: both are
// renewed at 70-90% of NotBefore..NotAfter (0.6-2.2 minutes after they were
// issued) while a pod runs, the node stays Ready throughout, and kubectl logs and exec
// keep working on the new serving certificate.
func TestTLSBootstrapAndRotation(t *testing.T) {
	name := "e2e-bootstrap"
	c := framework.RequireCluster(t)
	n := framework.NewBootstrapNodelet(t, c, name)
	n.AppendConfig("rotateCertificates: true\nserverTLSBootstrap: true\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go approveServingCSRs(ctx, t, c, name)
	start := time.Now()
	startNode(t, c, n)
	t.Logf("bootstrap start -> node Ready: %v", time.Since(start).Round(10*time.Millisecond))

	clientPEM := filepath.Join(n.CertDir, "kubelet-client-current.pem")
	target, err := os.Readlink(clientPEM)
	if err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Fatalf("%s: a symlink to kubelet-client-<timestamp>.pem expected: %q %v", clientPEM, target, err)
	}
	client := readCert(t, clientPEM)
	if client.Subject.CommonName != "system:node:"+name || len(client.Subject.Organization) != 1 || client.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client certificate subject %v", client.Subject)
	}
	kc, err := clientcmd.LoadFromFile(n.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]; auth == nil || auth.ClientCertificate != clientPEM || auth.ClientKey != clientPEM {
		t.Errorf("the written kubeconfig does not point at %s: %+v", clientPEM, auth)
	}
	servingPEM := filepath.Join(n.CertDir, "kubelet-server-current.pem")
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		_, err := os.Stat(servingPEM)
		return err == nil
	}, "the serving certificate issued")
	serving := readCert(t, servingPEM)
	var ips []string
	for _, ip := range serving.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !strings.Contains(strings.Join(ips, ","), c.NodeIP) || serving.Subject.CommonName != "system:node:"+name {
		t.Errorf("serving certificate: subject %v, IPs %v (want %s)", serving.Subject, ips, c.NodeIP)
	}
	t.Logf("client certificate serial %s (until %s), serving certificate serial %s (until %s)",
		client.SerialNumber, client.NotAfter.Format(time.TimeOnly), serving.SerialNumber, serving.NotAfter.Format(time.TimeOnly))

	ns := c.Namespace(t, "bootstrap")
	createPods(t, c, ns, busyboxPod("ticker", name, "while true; do echo tick; sleep 1; done"))
	waitPod(t, c, ns, "ticker", 60*time.Second, "running", podReady)
	kubeletAPIWorks(t, c, ns, "ticker")

	// The rotations, at 70-90% of the certificates' lifetime.
	deadline := client.NotAfter.Add(time.Minute)
	var newClient, newServing *x509.Certificate
	notReady := 0
	for time.Now().Before(deadline) && (newClient == nil || newServing == nil) {
		time.Sleep(2 * time.Second)
		if c.NodeReady(t, name) != v1.ConditionTrue {
			notReady++
		}
		if cur := readCert(t, clientPEM); newClient == nil && cur.SerialNumber.Cmp(client.SerialNumber) != 0 {
			newClient = cur
			t.Logf("client certificate rotated %v after the bootstrap started (it expires at %s): serial %s -> %s", time.Since(start).Round(time.Second), client.NotAfter.Format(time.TimeOnly), client.SerialNumber, cur.SerialNumber)
		}
		if cur := readCert(t, servingPEM); newServing == nil && cur.SerialNumber.Cmp(serving.SerialNumber) != 0 {
			newServing = cur
			t.Logf("serving certificate rotated %v after the bootstrap started (it expires at %s): serial %s -> %s", time.Since(start).Round(time.Second), serving.NotAfter.Format(time.TimeOnly), serving.SerialNumber, cur.SerialNumber)
		}
	}
	if newClient == nil || newServing == nil {
		t.Fatalf("not rotated before the old certificates expired: client %v, serving %v", newClient != nil, newServing != nil)
	}
	if notReady > 0 {
		t.Errorf("the node was not Ready in %d of its checks during the rotations", notReady)
	}
	if !strings.Contains(n.Log(), "Certificate rotation detected, shutting down client connections to start using new credentials") {
		t.Error("the API clients never switched to the new client certificate")
	}
	kubeletAPIWorks(t, c, ns, "ticker")
	// After the old client certificate's expiry the node still reports.
	time.Sleep(time.Until(client.NotAfter.Add(5 * time.Second)))
	framework.Eventually(t, 30*time.Second, time.Second, func() bool { return c.NodeReady(t, name) == v1.ConditionTrue },
		"the node Ready after the first client certificate expired")
	wantRunning(t, c, ns, "ticker")
}

// writeExpiredKubeconfig writes a kubeconfig for the node with a client
// certificate of the cluster CA that expired an hour ago.
func writeExpiredKubeconfig(t *testing.T, c *framework.Cluster, node, path string) {
	t.Helper()
	caCert := readCert(t, filepath.Join(c.PKI, "ca.crt"))
	caKeyAny, err := keyutil.PrivateKeyFromFile(filepath.Join(c.PKI, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKeyAny)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(c.PKI, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": {Server: "https://127.0.0.1:6443", CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"node": {ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ClientKeyData: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}},
		Contexts:       map[string]*clientcmdapi.Context{"default": {Cluster: "local", AuthInfo: "node"}},
		CurrentContext: "default",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

// TestTLSBootstrapExpiredClientCert: a kubeconfig whose client certificate
// has expired (a node down for longer than its certificate lives) is
// replaced through the bootstrap kubeconfig at start (upstream #65991 is
// the node stuck on an expired certificate): without rotation, nodelet
// waits for the new certificate, then registers.
func TestTLSBootstrapExpiredClientCert(t *testing.T) {
	name := "e2e-bootstrap-expired"
	c := framework.RequireCluster(t)
	n := framework.NewBootstrapNodelet(t, c, name)
	writeExpiredKubeconfig(t, c, name, n.Kubeconfig)
	startNode(t, c, n)
	log := n.Log()
	if !strings.Contains(log, `"The kubeconfig's client certificate cannot be used: bootstrapping"`) || !strings.Contains(log, `reason="expired"`) {
		t.Errorf("nodelet did not say why it bootstrapped:\n%s", grepLines(log, "certificate"))
	}
	cert := readCert(t, filepath.Join(n.CertDir, "kubelet-client-current.pem"))
	if time.Now().After(cert.NotAfter) || cert.Subject.CommonName != "system:node:"+name {
		t.Errorf("new client certificate: %v until %v", cert.Subject, cert.NotAfter)
	}
	if _, err := os.Stat(filepath.Join(n.CertDir, "kubelet-client.key.tmp")); !os.IsNotExist(err) {
		t.Errorf("the pending key file is left: %v", err)
	}
}
