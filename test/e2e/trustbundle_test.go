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
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// selfSignedPEM is a throwaway CA certificate in PEM.
func selfSignedPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestClusterTrustBundleVolumes: projected clusterTrustBundle sources
// (certificates.k8s.io/v1, GA in 1.37) by name, and by signer name and
// label selector (the union of the matching bundles' certificates), and an
// optional one that matches nothing (an empty file).
func TestClusterTrustBundleVolumes(t *testing.T) {
	const node = "ctb-node"
	c, _ := clusterNode(t, node, "")
	ctx := context.Background()
	ns := c.Namespace(t, "ctb")
	signer := "example.com/" + ns
	plain, a, b := selfSignedPEM(t, "plain"), selfSignedPEM(t, "signer-a"), selfSignedPEM(t, "signer-b")
	signerBundle := strings.ReplaceAll(signer, "/", ":") + ":"
	bundles := []*certificatesv1.ClusterTrustBundle{
		{ObjectMeta: metav1.ObjectMeta{Name: ns + "-plain"}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: plain}},
		{ObjectMeta: metav1.ObjectMeta{Name: signerBundle + "a", Labels: map[string]string{"e2e": ns}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: a}},
		{ObjectMeta: metav1.ObjectMeta{Name: signerBundle + "b", Labels: map[string]string{"e2e": ns}}, Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: b}},
	}
	for _, ctb := range bundles {
		if _, err := c.Client.CertificatesV1().ClusterTrustBundles().Create(ctx, ctb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ClusterTrustBundle %s: %v", ctb.Name, err)
		}
		name := ctb.Name
		t.Cleanup(func() {
			_ = c.Client.CertificatesV1().ClusterTrustBundles().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	p := busyboxPod("trust", node, `for f in by-name by-signer none; do echo "== $f"; cat /trust/$f; done; echo END; sleep 3600`)
	p.Spec.Volumes = []v1.Volume{{Name: "trust", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To(ns + "-plain"), Path: "by-name"}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": ns}}, Path: "by-signer"}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": "nothing"}}, Optional: ptr.To(true), Path: "none"}},
	}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "trust", MountPath: "/trust"}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c, ns, "trust", 60*time.Second, "Ready", podReady)
	out := podOutput(t, c, ns, "trust", "c")
	parts := strings.SplitN(out, "== by-signer\n", 2)
	if len(parts) != 2 {
		t.Fatalf("output: %s", out)
	}
	signerPart, nonePart, _ := strings.Cut(parts[1], "== none\n")
	if got := strings.TrimPrefix(parts[0], "== by-name\n"); got != plain {
		t.Errorf("by-name:\n%s\nwant the plain bundle:\n%s", got, plain)
	}
	if !strings.Contains(signerPart, strings.TrimSpace(a)) || !strings.Contains(signerPart, strings.TrimSpace(b)) || strings.Count(signerPart, "BEGIN CERTIFICATE") != 2 {
		t.Errorf("by-signer: want both signer bundles' certificates once:\n%s", signerPart)
	}
	if strings.TrimSpace(strings.TrimSuffix(nonePart, "END\n")) != "" {
		t.Errorf("the optional source matching nothing: %q, want an empty file", nonePart)
	}
}
