package volumes

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/maphash"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// selfSigned returns a new self-signed CA certificate's DER.
func selfSigned(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pemOf(typ string, headers map[string]string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Headers: headers, Bytes: der}))
}

// anchorsOf decodes a trust bundle file: each block's DER, failing on a
// block that is not a bare CERTIFICATE or on trailing bytes.
func anchorsOf(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	rest := data
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			t.Fatalf("not PEM: %q", rest)
		}
		if b.Type != "CERTIFICATE" || len(b.Headers) != 0 {
			t.Errorf("block %q with headers %v; want a bare CERTIFICATE", b.Type, b.Headers)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Errorf("block is not a certificate: %v", err)
		}
		out = append(out, b.Bytes)
	}
	return out
}

// sameSet reports whether got and want hold the same DERs, each once.
func sameSet(got, want [][]byte) bool {
	key := func(l [][]byte) []string {
		s := make([]string, len(l))
		for i, d := range l {
			s[i] = string(d)
		}
		slices.Sort(s)
		return s
	}
	return slices.Equal(key(got), key(want))
}

func TestNormalizeTrustAnchors(t *testing.T) {
	a, b, c := selfSigned(t, "a"), selfSigned(t, "b"), selfSigned(t, "c")
	for _, tc := range []struct {
		name    string
		bundles []string
		want    [][]byte
	}{
		{"one certificate", []string{pemOf("CERTIFICATE", nil, a)}, [][]byte{a}},
		{"two in one bundle", []string{pemOf("CERTIFICATE", nil, a) + pemOf("CERTIFICATE", nil, b)}, [][]byte{a, b}},
		{"union of bundles", []string{pemOf("CERTIFICATE", nil, a), pemOf("CERTIFICATE", nil, b) + pemOf("CERTIFICATE", nil, c)}, [][]byte{a, b, c}},
		{"duplicates once, headers dropped", []string{
			pemOf("CERTIFICATE", nil, a) + pemOf("CERTIFICATE", nil, a),
			pemOf("CERTIFICATE", map[string]string{"Comment": "again"}, a) + pemOf("CERTIFICATE", nil, b),
		}, [][]byte{a, b}},
		{"any block type, re-encoded as CERTIFICATE", []string{pemOf("TRUSTED CERTIFICATE", nil, c)}, [][]byte{c}},
		{"text around blocks skipped", []string{"# root\n" + pemOf("CERTIFICATE", nil, a) + "junk\n" + pemOf("CERTIFICATE", nil, b) + "trailer"}, [][]byte{a, b}},
		{"no PEM: empty", []string{"not pem"}, nil},
		{"no bundle: empty", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := maphash.MakeSeed()
			got := normalizeTrustAnchors(tc.bundles, seed)
			if got == nil {
				t.Fatal("nil; want a (possibly empty) file")
			}
			if anchors := anchorsOf(t, got); !sameSet(anchors, tc.want) || len(anchors) != len(tc.want) {
				t.Errorf("got %d anchors, want %d (%v)", len(anchors), len(tc.want), anchors)
			}
			// The order depends on the anchors and the seed only: not on
			// the order of the bundles, nor on the call.
			reversed := slices.Clone(tc.bundles)
			slices.Reverse(reversed)
			if again := normalizeTrustAnchors(reversed, seed); string(again) != string(got) {
				t.Error("the order of the bundles changed the file")
			}
		})
	}
}

// fakeBundles is the Getter's ClusterTrustBundle reads over a list. Its
// list selects by labels only (as upstream's lister): the signer is for
// the caller to check.
type fakeBundles struct {
	ctbs []certificatesv1.ClusterTrustBundle
	err  error // every read fails with err
}

func (f *fakeBundles) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	if f.err != nil {
		return nil, f.err
	}
	for i := range f.ctbs {
		if f.ctbs[i].Name == name {
			return &f.ctbs[i], nil
		}
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundle"), name)
}

func (f *fakeBundles) ClusterTrustBundles(_ context.Context, _ string, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []certificatesv1.ClusterTrustBundle
	for _, b := range f.ctbs {
		if selector.Matches(labels.Set(b.Labels)) {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeBundles) ConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
}

func (f *fakeBundles) Secret(_ context.Context, _, name string) (*v1.Secret, error) {
	return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
}

func (f *fakeBundles) Token(context.Context, *v1.Pod, string, string, int64) (string, error) {
	return "token", nil
}

func ctb(name, signer string, lbls map[string]string, ders ...[]byte) certificatesv1.ClusterTrustBundle {
	var bundle string
	for _, d := range ders {
		bundle += pemOf("CERTIFICATE", nil, d)
	}
	return certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle},
	}
}

func TestTrustAnchors(t *testing.T) {
	a, b, c, d := selfSigned(t, "a"), selfSigned(t, "b"), selfSigned(t, "c"), selfSigned(t, "d")
	const signer = "example.com/signer"
	bundles := []certificatesv1.ClusterTrustBundle{
		ctb("named", "", nil, a, b),
		ctb("signer:prod", signer, map[string]string{"env": "prod"}, b, c),
		ctb("signer:prod2", signer, map[string]string{"env": "prod", "tier": "2"}, c),
		ctb("signer:dev", signer, map[string]string{"env": "dev"}, d),
		ctb("other:prod", "example.com/other", map[string]string{"env": "prod"}, a),
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	long := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := range 2000 {
		long.MatchLabels[fmt.Sprintf("k%04d", i)] = strings.Repeat("v", 60)
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		p       v1.ClusterTrustBundleProjection
		err     error // the reads fail with it
		want    [][]byte
		wantErr string // the error's text, or its prefix when it ends with "..."
	}{
		{name: "by name", p: v1.ClusterTrustBundleProjection{Name: ptr.To("named")}, want: [][]byte{a, b}},
		{name: "by name, missing",
			p:       v1.ClusterTrustBundleProjection{Name: ptr.To("nope")},
			wantErr: `while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "nope" not found`},
		{name: "by name, missing, optional: empty file",
			p: v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true)}},
		{name: "by name, optional excuses only a missing bundle",
			p: v1.ClusterTrustBundleProjection{Name: ptr.To("named"), Optional: ptr.To(true)}, err: boom,
			wantErr: "while getting ClusterTrustBundle: boom"},
		{name: "by signer and selector: that signer's matching bundles, deduplicated",
			p:    v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: prod},
			want: [][]byte{b, c}},
		{name: "by signer, empty selector: all the signer's bundles",
			p:    v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: &metav1.LabelSelector{}},
			want: [][]byte{b, c, d}},
		{name: "by signer, no selector: matches nothing",
			p:       v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer)},
			wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "by signer, no selector, optional: empty file",
			p: v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), Optional: ptr.To(true)}},
		{name: "by signer, no match",
			p:       v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/none"), LabelSelector: prod},
			wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "by signer, no match, optional: empty file",
			p: v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/none"), LabelSelector: prod, Optional: ptr.To(true)}},
		{name: "by signer, invalid selector",
			p: v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}},
			wantErr: `while parsing label selector: "Near" is not a valid label selector operator`},
		{name: "by signer, selector too long",
			p:       v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: long},
			wantErr: "label selector length (133999) is larger than 102400"},
		{name: "by signer, list fails (optional or not)",
			p: v1.ClusterTrustBundleProjection{SignerName: ptr.To(signer), LabelSelector: prod, Optional: ptr.To(true)}, err: boom,
			wantErr: "while listing ClusterTrustBundles matching label selector &LabelSelector{MatchLabels:map[string]string{env: prod,},MatchExpressions:[]LabelSelectorRequirement{},}: boom"},
		{name: "neither name nor signer",
			p:       v1.ClusterTrustBundleProjection{LabelSelector: prod},
			wantErr: "ClusterTrustBundle projection requires either name or signerName to be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeBundles{ctbs: bundles, err: tc.err}
			got, err := trustAnchors(context.Background(), g, &tc.p, maphash.MakeSeed())
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("nil; want a (possibly empty) file")
			}
			if anchors := anchorsOf(t, got); !sameSet(anchors, tc.want) || len(anchors) != len(tc.want) {
				t.Errorf("got %d anchors, want %d", len(anchors), len(tc.want))
			}
		})
	}
}

// The API getter reads ClusterTrustBundles through certificates.k8s.io/v1,
// cached for the TTL as ConfigMaps are; a nil selector lists nothing.
func TestAPIGetterClusterTrustBundles(t *testing.T) {
	a, b := selfSigned(t, "a"), selfSigned(t, "b")
	const signer = "example.com/signer"
	objs := []certificatesv1.ClusterTrustBundle{
		ctb("named", "", nil, a),
		ctb("signer-prod", signer, map[string]string{"env": "prod"}, a),
		ctb("signer-dev", signer, map[string]string{"env": "dev"}, b),
		ctb("other-prod", "example.com/other", map[string]string{"env": "prod"}, b),
	}
	client := fake.NewClientset()
	ctx := context.Background()
	for i := range objs {
		if _, err := client.CertificatesV1().ClusterTrustBundles().Create(ctx, &objs[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	g := newAPIGetter(t, APIGetterConfig{Client: client, Clock: clk, TTL: time.Minute})
	reads := func() int { return len(client.Actions()) - len(objs) }

	got, err := g.ClusterTrustBundle(ctx, "named")
	if err != nil || got.Spec.TrustBundle != objs[0].Spec.TrustBundle {
		t.Fatalf("by name: %v %v", got, err)
	}
	_, err = g.ClusterTrustBundle(ctx, "nope")
	if !apierrors.IsNotFound(err) || err.Error() != `clustertrustbundle.certificates.k8s.io "nope" not found` {
		t.Fatalf("missing: %v", err)
	}

	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	list, err := g.ClusterTrustBundles(ctx, signer, prod)
	if err != nil || len(list) != 1 || list[0].Name != "signer-prod" {
		t.Fatalf("by signer: %v %v", list, err)
	}
	all, err := g.ClusterTrustBundles(ctx, signer, labels.Everything())
	if err != nil || len(all) != 2 {
		t.Fatalf("all of the signer's: %v %v", all, err)
	}
	n := reads()
	if _, err := g.ClusterTrustBundles(ctx, signer, prod); err != nil || reads() != n {
		t.Errorf("a list within the TTL was read again (%d reads, then %d): %v", n, reads(), err)
	}
	if _, err := g.ClusterTrustBundle(ctx, "named"); err != nil || reads() != n {
		t.Errorf("a bundle within the TTL was read again (%d reads, then %d): %v", n, reads(), err)
	}
	if none, err := g.ClusterTrustBundles(ctx, signer, labels.Nothing()); err != nil || len(none) != 0 || reads() != n {
		t.Errorf("nothing selector: %v %v, %d reads (want %d)", none, err, reads(), n)
	}
	clk.Step(time.Minute)
	if _, err := g.ClusterTrustBundles(ctx, signer, prod); err != nil || reads() != n+1 {
		t.Errorf("a list past the TTL was not read again (%d reads, then %d): %v", n, reads(), err)
	}
	last := client.Actions()[len(client.Actions())-1]
	if r := last.GetResource(); r.Group != "certificates.k8s.io" || r.Version != "v1" || r.Resource != "clustertrustbundles" {
		t.Errorf("read %v; want certificates.k8s.io/v1 clustertrustbundles", r)
	}
}

// A projected volume's clusterTrustBundle source: its file, mode and owner
// as upstream's (the mode of a service account token).
func TestProjectClusterTrustBundle(t *testing.T) {
	a := selfSigned(t, "a")
	bundles := []certificatesv1.ClusterTrustBundle{ctb("named", "", nil, a)}
	user := int64(1000)
	for _, tc := range []struct {
		name    string
		static  bool
		sources []v1.VolumeProjection
		sc      *v1.PodSecurityContext
		want    map[string]file // data "anchors" stands for a's PEM
		wantErr string
	}{
		{name: "default mode",
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("named"), Path: "ca.pem"}}},
			want:    map[string]file{"ca.pem": {[]byte("anchors"), 0o644, -1}}},
		{name: "fsGroup: 0600 (the fsGroup adds its read bits)",
			sc:      &v1.PodSecurityContext{FSGroup: ptr.To(int64(2000))},
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("named"), Path: "ca.pem"}}},
			want:    map[string]file{"ca.pem": {[]byte("anchors"), 0o600, -1}}},
		{name: "every container the same user: 0600, owned by it",
			sc:      &v1.PodSecurityContext{RunAsUser: &user},
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("named"), Path: "ca.pem"}}},
			want:    map[string]file{"ca.pem": {[]byte("anchors"), 0o600, 1000}}},
		{name: "optional and missing: an empty file",
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{
				SignerName: ptr.To("example.com/none"), LabelSelector: &metav1.LabelSelector{}, Optional: ptr.To(true), Path: "sub/ca.pem"}}},
			want: map[string]file{"sub/ca.pem": {[]byte{}, 0o644, -1}}},
		{name: "missing",
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Path: "ca.pem"}}},
			wantErr: `while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "nope" not found`},
		{name: "static pod", static: true,
			sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("named"), Path: "ca.pem"}}},
			wantErr: errNoAPI.Error()},
		{name: "podCertificate without a manager",
			sources: []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/s"}}},
			wantErr: "podCertificate projected volumes need the API server and the feature gate PodCertificateRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ManagerConfig{PodsDir: t.TempDir()}
			if !tc.static {
				cfg.Getter = &fakeBundles{ctbs: bundles}
			}
			m := newManager(t, cfg)
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
				Spec: v1.PodSpec{SecurityContext: tc.sc, Containers: []v1.Container{{Name: "c"}}}}
			vol := &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: tc.sources, DefaultMode: ptr.To(int32(0o644))}}}
			files, err := m.project(context.Background(), pod, vol)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(tc.want) {
				t.Fatalf("files %v; want %v", files, tc.want)
			}
			for p, w := range tc.want {
				f, ok := files[p]
				if !ok {
					t.Fatalf("no file %s", p)
				}
				if string(w.data) == "anchors" {
					w.data = []byte(pemOf("CERTIFICATE", nil, a))
				}
				if string(f.data) != string(w.data) || f.data == nil || f.mode != w.mode || f.uid != w.uid {
					t.Errorf("%s: %q %v uid %d; want %q %v uid %d", p, f.data, f.mode, f.uid, w.data, w.mode, w.uid)
				}
			}
		})
	}
}
