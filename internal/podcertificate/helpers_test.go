package podcertificate

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

const (
	testNode   = "node1"
	testSigner = "foo.com/signer"
)

// fakePods is Pods over a map.
type fakePods struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

func newFakePods(pods ...*v1.Pod) *fakePods {
	f := &fakePods{pods: map[types.UID]*v1.Pod{}}
	for _, p := range pods {
		f.pods[p.UID] = p
	}
	return f
}

func (f *fakePods) Get(uid types.UID) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[uid]
	return p, ok
}

func (f *fakePods) Admitted(exclude types.UID) []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*v1.Pod
	for uid, p := range f.pods {
		if uid != exclude {
			out = append(out, p)
		}
	}
	return out
}

func (f *fakePods) remove(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pods, uid)
}

func testNodeObject() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node1-uid"}}
}

func testServiceAccount() *v1.ServiceAccount {
	return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "workload", UID: "sa-uid"}}
}

// certPod is a pod with one projected volume "certificate" whose second
// source is a podCertificate source of keyType (the first is a
// ServiceAccountToken source).
func certPod(name string, uid types.UID, keyType string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name, UID: uid},
		Spec: v1.PodSpec{
			ServiceAccountName: "workload",
			NodeName:           testNode,
			Containers: []v1.Container{{
				Name: "main", Image: "notarealimage",
				VolumeMounts: []v1.VolumeMount{{Name: "certificate", MountPath: "/run/foo-cert"}},
			}},
			Volumes: []v1.Volume{{
				Name: "certificate",
				VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
					{PodCertificate: &v1.PodCertificateProjection{
						SignerName:           testSigner,
						KeyType:              keyType,
						CredentialBundlePath: "creds.pem",
						MaxExpirationSeconds: ptr.To[int32](86400),
						UserAnnotations:      map[string]string{"test.domain/foo": "bar"},
					}},
				}}},
			}},
		},
	}
}

// keyOf is the key of certPod's podCertificate source.
func keyOf(pod *v1.Pod) projectionKey {
	return projectionKey{Namespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID), VolumeName: "certificate", SourceIndex: 1}
}

// nameRequests makes the fake clientset do what the API server does on
// create: a name from generateName, and a creation timestamp from clk.
func nameRequests(client *fake.Clientset, clk clock.PassiveClock) {
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "podcertificaterequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().(*certificatesv1.PodCertificateRequest)
		mu.Lock()
		n++
		obj.Name = fmt.Sprintf("%s%d", obj.GenerateName, n)
		mu.Unlock()
		obj.CreationTimestamp = metav1.NewTime(clk.Now())
		return false, obj, nil
	})
}

// testCA signs the requests' public keys.
type testCA struct {
	key  crypto.Signer
	cert *x509.Certificate
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{key: key, cert: cert}
}

// issue signs pcr for 24 hours from now, to be refreshed after 23, and
// marks it issued. The chain has text between and headers in its blocks,
// which the manager drops; the returned chain is what it keeps.
func (ca *testCA) issue(t *testing.T, pcr *certificatesv1.PodCertificateRequest, now time.Time) (clean string) {
	t.Helper()
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatalf("stub PKCS#10 request: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatalf("proof of possession: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: pcr.Spec.PodName},
		NotBefore:    now,
		NotAfter:     now.Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	root := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	rootWithHeader := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": "x"}, Bytes: ca.cert.Raw})
	pcr.Status = issuedStatus("leaf\n"+string(leaf)+"root\n"+string(rootWithHeader), now)
	return string(leaf) + string(root)
}

func issuedStatus(chain string, now time.Time) certificatesv1.PodCertificateRequestStatus {
	return certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{
			Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Reason", LastTransitionTime: metav1.NewTime(now),
		}},
		CertificateChain: chain,
		NotBefore:        ptr.To(metav1.NewTime(now)),
		BeginRefreshAt:   ptr.To(metav1.NewTime(now.Add(23 * time.Hour))),
		NotAfter:         ptr.To(metav1.NewTime(now.Add(24 * time.Hour))),
	}
}

// newTestManager is a Manager for pods over a fake clientset holding the
// node's service account, its informer not running (tests add requests to
// its store), with no jitter.
func newTestManager(t *testing.T, clk clock.WithTicker, pods ...*v1.Pod) (*Manager, *fake.Clientset, *fakePods, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset(testServiceAccount())
	nameRequests(client, clk)
	fp := newFakePods(pods...)
	rec := record.NewFakeRecorder(100)
	m, err := New(Config{Client: client, NodeName: testNode, Node: testNodeObject, Pods: fp, Recorder: rec, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m.jitter = func() time.Duration { return 0 }
	return m, client, fp, rec
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	got, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
