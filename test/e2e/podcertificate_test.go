package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestClusterPodCertificates: podCertificate projected sources
// (PodCertificateRequest, GA in 1.37). A toy signer run by the test issues
// the node's PodCertificateRequests for one signer name and denies those
// for another: the pod of the first gets its key (PKCS#8), its chain and
// the credential bundle, the certificate for that very key; the pod of the
// second stays Pending with upstream's FailedMount message.
func TestClusterPodCertificates(t *testing.T) {
	const node = "podcert-node"
	c, _ := clusterNode(t, node, "")
	ns := c.Namespace(t, "podcert")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	issue, deny := "e2e.nodelet.test/issue-"+ns, "e2e.nodelet.test/deny-"+ns
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e pod CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	// The signer: issue or deny each new request of the namespace.
	go func() {
		pcrs := c.Client.CertificatesV1().PodCertificateRequests(ns)
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			list, err := pcrs.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range list.Items {
				pcr := list.Items[i].DeepCopy()
				if len(pcr.Status.Conditions) > 0 {
					continue
				}
				now := time.Now()
				switch pcr.Spec.SignerName {
				case deny:
					pcr.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied,
						Status: metav1.ConditionTrue, Reason: "E2EPolicy", Message: "not for this pod", LastTransitionTime: metav1.NewTime(now)}}
				case issue:
					req, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
					if err != nil {
						t.Errorf("the request's PKCS#10: %v", err)
						continue
					}
					notBefore := now.Add(-time.Minute).Truncate(time.Second)
					notAfter := notBefore.Add(24 * time.Hour)
					der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()),
						Subject: pkix.Name{CommonName: pcr.Spec.PodName}, NotBefore: notBefore, NotAfter: notAfter,
						KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, req.PublicKey, caKey)
					if err != nil {
						t.Errorf("signing: %v", err)
						continue
					}
					pcr.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued,
						Status: metav1.ConditionTrue, Reason: "E2EIssued", Message: "issued", LastTransitionTime: metav1.NewTime(now)}}
					pcr.Status.CertificateChain = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
					pcr.Status.NotBefore = ptr.To(metav1.NewTime(notBefore))
					pcr.Status.BeginRefreshAt = ptr.To(metav1.NewTime(notAfter.Add(-time.Hour)))
					pcr.Status.NotAfter = ptr.To(metav1.NewTime(notAfter))
				default:
					continue
				}
				if _, err := pcrs.UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					t.Logf("signer: %v", err)
				}
			}
		}
	}()
	podWith := func(name, signer string) *v1.Pod {
		p := busyboxPod(name, node, "cat /certs/key.pem; echo SPLIT; cat /certs/chain.pem; echo SPLIT; cat /certs/bundle.pem; echo END; sleep 3600")
		p.Spec.Volumes = []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256",
				KeyPath: "key.pem", CertificateChainPath: "chain.pem", CredentialBundlePath: "bundle.pem"}}}}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "certs", MountPath: "/certs"}}
		return p
	}
	for _, p := range []*v1.Pod{podWith("issued", issue), podWith("denied", deny)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPod(t, c, ns, "issued", 90*time.Second, "Ready", podReady)
	parts := strings.Split(podOutput(t, c, ns, "issued", "c"), "SPLIT\n")
	if len(parts) != 3 {
		t.Fatalf("output %q", parts)
	}
	keyBlock, _ := pem.Decode([]byte(parts[0]))
	certBlock, _ := pem.Decode([]byte(parts[1]))
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" || certBlock == nil || certBlock.Type != "CERTIFICATE" {
		t.Fatalf("key %q, chain %q", parts[0], parts[1])
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := key.(*ecdsa.PrivateKey); !ok || !pub.PublicKey.Equal(cert.PublicKey) || cert.Subject.CommonName != "issued" {
		t.Errorf("the certificate (%s) is not for the pod's key (%T)", cert.Subject.CommonName, key)
	}
	if !bytes.Equal([]byte(strings.TrimSuffix(parts[2], "END\n")), []byte(parts[0]+parts[1])) {
		t.Errorf("credential bundle %q, want the key then the chain", parts[2])
	}
	// The request: the node's, for the pod.
	list, err := c.Client.CertificatesV1().PodCertificateRequests(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pcr := range list.Items {
		found = found || (pcr.Spec.PodName == "issued" && pcr.Spec.NodeName == node && pcr.Spec.SignerName == issue)
	}
	if !found {
		t.Errorf("no PodCertificateRequest of the node for the pod among %d", len(list.Items))
	}
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, func() bool {
		for _, e := range podEvents(t, c, ns, "denied") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, "was permanently denied") && strings.Contains(e.Message, "not for this pod") {
				return true
			}
		}
		return false
	}, "the denied pod's FailedMount event")
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "denied", metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodPending {
		t.Errorf("denied pod: %v %v, want Pending", p.Status.Phase, err)
	}
}
