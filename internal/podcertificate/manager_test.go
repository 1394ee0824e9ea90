package podcertificate

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	full := Config{
		Client: fake.NewClientset(), NodeName: testNode, Node: testNodeObject, Pods: newFakePods(), Recorder: record.NewFakeRecorder(1),
	}
	without := func(f func(*Config)) Config { c := full; f(&c); return c }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: without(func(c *Config) { c.Client = nil }), WantErr: "Config.Client is required"},
		{Name: "no node name", Config: without(func(c *Config) { c.NodeName = "" }), WantErr: "Config.NodeName is required"},
		{Name: "no node", Config: without(func(c *Config) { c.Node = nil }), WantErr: "Config.Node is required"},
		{Name: "no pods", Config: without(func(c *Config) { c.Pods = nil }), WantErr: "Config.Pods is required"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Config.Recorder is required"},
		{Name: "defaults", Config: full},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.clock)
		if m.jitter == nil {
			t.Error("no jitter")
		}
	})
}

// listRequests returns the requests of ns1.
func listRequests(t *testing.T, client *fake.Clientset) []certificatesv1.PodCertificateRequest {
	t.Helper()
	l, err := client.CertificatesV1().PodCertificateRequests("ns1").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// toInformer puts the API's version of pcr in the manager's informer
// store, as a watch event would.
func toInformer(t *testing.T, m *Manager, pcr *certificatesv1.PodCertificateRequest) {
	t.Helper()
	if err := m.informer.GetIndexer().Add(pcr); err != nil {
		t.Fatal(err)
	}
}

func stateOf(m *Manager, key projectionKey) credState {
	m.lock.Lock()
	defer m.lock.Unlock()
	if rec := m.credStore[key]; rec != nil {
		return rec.curState
	}
	return nil
}

// The first step creates the request for the pod, as upstream's
// TestTransitionInitialToWait.
func TestTransitionInitialToWait(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	pod := certPod("workload", "workload-uid", "ED25519")
	m, client, _, _ := newTestManager(t, clk, pod)

	if err := m.handleProjection(t.Context(), keyOf(pod)); err != nil {
		t.Fatalf("handleProjection: %v", err)
	}
	got := listRequests(t, client)
	if len(got) != 1 {
		t.Fatalf("%d PodCertificateRequests, want 1", len(got))
	}
	want := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    "ns1",
			GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: "workload", UID: "workload-uid",
			}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                testSigner,
			PodName:                   "workload",
			PodUID:                    "workload-uid",
			ServiceAccountName:        "workload",
			ServiceAccountUID:         "sa-uid",
			NodeName:                  testNode,
			NodeUID:                   "node1-uid",
			MaxExpirationSeconds:      ptr.To[int32](86400),
			UnverifiedUserAnnotations: map[string]string{"test.domain/foo": "bar"},
		},
	}
	gotClone := got[0].DeepCopy()
	gotClone.ObjectMeta = metav1.ObjectMeta{Namespace: got[0].Namespace, GenerateName: got[0].GenerateName, OwnerReferences: got[0].OwnerReferences}
	gotClone.TypeMeta = metav1.TypeMeta{}
	gotClone.Spec.StubPKCS10Request = nil
	if !apiequality.Semantic.DeepEqual(want, gotClone) {
		t.Fatalf("bad PodCertificateRequest:\n%s", diff.Diff(want, gotClone))
	}
	csr, err := x509.ParseCertificateRequest(got[0].Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatalf("proof of possession: %v", err)
	}
	w, ok := stateOf(m, keyOf(pod)).(*credStateWait)
	if !ok {
		t.Fatalf("state %T, want credStateWait", stateOf(m, keyOf(pod)))
	}
	if w.pcrName != got[0].Name || !w.pcrAbandonAt.Equal(clk.Now().Add(assumeDeletedThreshold)) {
		t.Errorf("wait state %q until %v", w.pcrName, w.pcrAbandonAt)
	}
	// The key in the state is the one the proof was made with.
	block, _ := pem.Decode(w.privateKey)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
		t.Error("the request's key is not the private key's")
	}
	if _, _, err := m.GetPodCertificateCredentialBundle(t.Context(), "ns1", "workload", "workload-uid", "certificate", 1); err == nil ||
		err.Error() != "credential bundle is not issued yet" {
		t.Errorf("bundle while waiting: %v", err)
	}
}

// A request deleted while waiting is, after assumeDeletedThreshold, created
// again (upstream's TestPCRDeletedWhileWaiting, which only checked the
// error).
func TestPCRDeletedWhileWaiting(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	pod := certPod("workload", "workload-uid", "ED25519")
	m, client, _, _ := newTestManager(t, clk, pod)
	key := keyOf(pod)
	if err := m.handleProjection(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	// Not in the informer yet: it may lag behind.
	err := m.handleProjection(t.Context(), key)
	if err == nil || !strings.Contains(err.Error(), "while getting PodCertificateRequest") {
		t.Fatalf("error %v, want a not found one", err)
	}
	if _, ok := stateOf(m, key).(*credStateWait); !ok {
		t.Fatalf("state %T, want credStateWait", stateOf(m, key))
	}
	clk.Step(assumeDeletedThreshold + time.Minute)
	err = m.handleProjection(t.Context(), key)
	if err == nil || !strings.Contains(err.Error(), `PodCertificateRequest "ns1/req-1" appears to have been deleted`) {
		t.Fatalf("error %v, want the request assumed deleted", err)
	}
	if _, ok := stateOf(m, key).(*credStateInitial); !ok {
		t.Fatalf("state %T, want credStateInitial", stateOf(m, key))
	}
	if err := m.handleProjection(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(listRequests(t, client)); n != 2 {
		t.Errorf("%d requests, want a second one", n)
	}
}

// The whole life of a source: issued, refreshed at beginRefreshAt, the old
// credential served until the new one is issued, warnings when the refresh
// is overdue and the certificate expired.
func TestIssueAndRefresh(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	pod := certPod("workload", "workload-uid", "ECDSAP256")
	m, client, _, rec := newTestManager(t, clk, pod)
	ca := newTestCA(t)
	key := keyOf(pod)
	ctx := t.Context()

	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	pcr := listRequests(t, client)[0]
	toInformer(t, m, &pcr) // pending
	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok := stateOf(m, key).(*credStateWait); !ok {
		t.Fatalf("state %T, want credStateWait", stateOf(m, key))
	}
	chain1 := ca.issue(t, &pcr, clk.Now())
	toInformer(t, m, &pcr)
	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	keyPEM, gotChain, err := m.GetPodCertificateCredentialBundle(ctx, "ns1", "workload", "workload-uid", "certificate", 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(gotChain) != chain1 {
		t.Errorf("chain:\n%s\nwant:\n%s", gotChain, chain1)
	}
	checkKeyMatches(t, keyPEM, gotChain)

	// Before beginRefreshAt: nothing happens.
	clk.Step(23*time.Hour - time.Second)
	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := len(listRequests(t, client)); n != 1 {
		t.Fatalf("%d requests before beginRefreshAt", n)
	}
	// At beginRefreshAt: a new request, with a new key.
	clk.Step(time.Second)
	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	pcrs := listRequests(t, client)
	if len(pcrs) != 2 {
		t.Fatalf("%d requests at beginRefreshAt, want 2", len(pcrs))
	}
	pcr2 := pcrs[1]
	if pcr2.Name == pcr.Name {
		pcr2 = pcrs[0]
	}
	toInformer(t, m, &pcr2)
	if _, ok := stateOf(m, key).(*credStateWaitRefresh); !ok {
		t.Fatalf("state %T, want credStateWaitRefresh", stateOf(m, key))
	}
	// Pending: the old credential is served; once overdue and expired, one
	// warning each.
	for range 2 {
		clk.Step(40 * time.Minute)
		if err := m.handleProjection(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, c, err := m.GetPodCertificateCredentialBundle(ctx, "ns1", "workload", "workload-uid", "certificate", 1); err != nil || string(c) != chain1 {
		t.Errorf("while refreshing: chain %q, %v; want the old one", c, err)
	}
	if got := m.MetricReport().PodCertificateStates; !reflect.DeepEqual(got, map[SignerAndState]int{{testSigner, StateExpired}: 1}) {
		t.Errorf("metrics %v", got)
	}
	wantEvents(t, rec, "Warning CertificateOverdueForRefresh PodCertificate refresh overdue", "Warning CertificateExpired PodCertificate expired")

	chain2 := ca.issue(t, &pcr2, clk.Now())
	toInformer(t, m, &pcr2)
	if err := m.handleProjection(ctx, key); err != nil {
		t.Fatal(err)
	}
	keyPEM2, gotChain2, err := m.GetPodCertificateCredentialBundle(ctx, "ns1", "workload", "workload-uid", "certificate", 1)
	if err != nil || string(gotChain2) != chain2 {
		t.Fatalf("after refresh: chain %q, %v", gotChain2, err)
	}
	checkKeyMatches(t, keyPEM2, gotChain2)
	if string(keyPEM2) == string(keyPEM) {
		t.Error("the refreshed credential has the old key")
	}
	if got := m.MetricReport().PodCertificateStates; !reflect.DeepEqual(got, map[SignerAndState]int{{testSigner, StateFresh}: 1}) {
		t.Errorf("metrics %v", got)
	}
	wantEvents(t, rec)
}

// A refresh request deleted goes back to credStateFresh, which creates
// another; the old credential is served meanwhile.
func TestRefreshPCRDeleted(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	pod := certPod("workload", "workload-uid", "ED25519")
	m, client, _, _ := newTestManager(t, clk, pod)
	key := keyOf(pod)
	now := clk.Now()
	m.credStore[key] = &projectionRecord{curState: &credStateWaitRefresh{
		issued:              issued{privateKey: []byte("k"), certChain: []byte("c"), beginRefreshAt: now, notAfter: now.Add(time.Hour)},
		refreshPCRName:      "gone",
		refreshPCRAbandonAt: now.Add(assumeDeletedThreshold),
	}}
	clk.Step(assumeDeletedThreshold + time.Second)
	if err := m.handleProjection(t.Context(), key); err == nil || err.Error() != "PodCertificateRequest appears to have been deleted" {
		t.Fatalf("error %v", err)
	}
	if _, ok := stateOf(m, key).(*credStateFresh); !ok {
		t.Fatalf("state %T, want credStateFresh", stateOf(m, key))
	}
	if k, c, err := m.GetPodCertificateCredentialBundle(t.Context(), "ns1", "workload", "workload-uid", "certificate", 1); err != nil || string(k) != "k" || string(c) != "c" {
		t.Errorf("bundle %q %q %v", k, c, err)
	}
	if err := m.handleProjection(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if n := len(listRequests(t, client)); n != 1 {
		t.Errorf("%d requests, want a new refresh request", n)
	}
}

// A denied or failed request is final: the bundle's error says why, the
// pod gets a warning event, and no new request is made.
func TestDeniedAndFailed(t *testing.T) {
	for _, tc := range []struct {
		condType, wantErr, wantEvent, wantState string
	}{{
		condType:  certificatesv1.PodCertificateRequestConditionTypeDenied,
		wantErr:   `PodCertificateRequest was permanently denied: reason="UnsupportedKeyType" message="no \"x\""`,
		wantEvent: `Warning Denied PodCertificateRequest ns1/req-1 was denied, reason="UnsupportedKeyType", message="no \"x\""`,
		wantState: StateDenied,
	}, {
		condType:  certificatesv1.PodCertificateRequestConditionTypeFailed,
		wantErr:   `PodCertificateRequest was permanently failed: reason="UnsupportedKeyType" message="no \"x\""`,
		wantEvent: `Warning Failed PodCertificateRequest ns1/req-1 failed, reason="UnsupportedKeyType", message="no \"x\""`,
		wantState: StateFailed,
	}} {
		t.Run(tc.condType, func(t *testing.T) {
			clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
			pod := certPod("workload", "workload-uid", "ED25519")
			m, client, _, rec := newTestManager(t, clk, pod)
			key := keyOf(pod)
			if err := m.handleProjection(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			pcr := listRequests(t, client)[0]
			pcr.Status.Conditions = []metav1.Condition{{Type: tc.condType, Status: metav1.ConditionTrue, Reason: "UnsupportedKeyType", Message: `no "x"`}}
			toInformer(t, m, &pcr)
			for range 2 {
				clk.Step(48 * time.Hour)
				if err := m.handleProjection(t.Context(), key); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := m.GetPodCertificateCredentialBundle(t.Context(), "ns1", "workload", "workload-uid", "certificate", 1); err == nil || err.Error() != tc.wantErr {
				t.Errorf("bundle error %v, want %s", err, tc.wantErr)
			}
			wantEvents(t, rec, tc.wantEvent)
			if n := len(listRequests(t, client)); n != 1 {
				t.Errorf("%d requests, want no new one", n)
			}
			if got := m.MetricReport().PodCertificateStates; !reflect.DeepEqual(got, map[SignerAndState]int{{testSigner, tc.wantState}: 1}) {
				t.Errorf("metrics %v", got)
			}
		})
	}
}

// Failures to create a request are errors (retried) with upstream's
// messages, and leave the source in its initial state.
func TestCreateErrors(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		node    func() *v1.Node
		wantErr string
	}{{
		name: "no service account",
		pod: func() *v1.Pod {
			p := certPod("workload", "workload-uid", "ED25519")
			p.Spec.ServiceAccountName = "other"
			return p
		}(),
		wantErr: `while creating initial PodCertificateRequest: while fetching service account: serviceaccounts "other" not found`,
	}, {
		name:    "node not registered",
		pod:     certPod("workload", "workload-uid", "ED25519"),
		node:    func() *v1.Node { return nil },
		wantErr: `while creating initial PodCertificateRequest: while getting node object from local cache: node "node1" not found`,
	}, {
		name:    "unknown key type",
		pod:     certPod("workload", "workload-uid", "DSA"),
		wantErr: `while creating initial PodCertificateRequest: while generating keypair: unknown key type "DSA"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m, client, _, _ := newTestManager(t, clk, tc.pod)
			if tc.node != nil {
				m.node = tc.node
			}
			err := m.handleProjection(t.Context(), keyOf(tc.pod))
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v\nwant %s", err, tc.wantErr)
			}
			if _, ok := stateOf(m, keyOf(tc.pod)).(*credStateInitial); !ok {
				t.Errorf("state %T", stateOf(m, keyOf(tc.pod)))
			}
			if n := len(listRequests(t, client)); n != 0 {
				t.Errorf("%d requests", n)
			}
		})
	}
}

// Pods gone are forgotten: by ForgetPod, or when their source is processed.
func TestForget(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	a, b := certPod("a", "a-uid", "ED25519"), certPod("b", "b-uid", "ED25519")
	m, _, pods, _ := newTestManager(t, clk, a, b)
	for _, p := range []*v1.Pod{a, b} {
		if err := m.handleProjection(t.Context(), keyOf(p)); err != nil {
			t.Fatal(err)
		}
	}
	m.ForgetPod(t.Context(), a)
	if _, _, err := m.GetPodCertificateCredentialBundle(t.Context(), "ns1", "a", "a-uid", "certificate", 1); err == nil ||
		err.Error() != "no credentials yet for key={ns1 a a-uid certificate 1}" {
		t.Errorf("after ForgetPod: %v", err)
	}
	pods.remove("b-uid")
	if err := m.handleProjection(t.Context(), keyOf(b)); err != nil {
		t.Fatal(err)
	}
	if len(m.credStore) != 0 {
		t.Errorf("credStore %v", m.credStore)
	}
}

// A key naming no podCertificate source is dropped.
func TestMissingSource(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	pod := certPod("workload", "workload-uid", "ED25519")
	m, client, _, _ := newTestManager(t, clk, pod)
	for _, key := range []projectionKey{
		{Namespace: "ns1", PodName: "workload", PodUID: "workload-uid", VolumeName: "certificate", SourceIndex: 0},
		{Namespace: "ns1", PodName: "workload", PodUID: "workload-uid", VolumeName: "certificate", SourceIndex: 7},
		{Namespace: "ns1", PodName: "workload", PodUID: "workload-uid", VolumeName: "other", SourceIndex: 1},
	} {
		if err := m.handleProjection(t.Context(), key); err != nil {
			t.Errorf("%v: %v", key, err)
		}
	}
	if len(m.credStore) != 0 || len(listRequests(t, client)) != 0 {
		t.Errorf("credStore %v", m.credStore)
	}
}

// TrackPod and the refresh pass queue the podCertificate sources of the
// pods, and the sources with credentials of pods gone.
func TestQueueing(t *testing.T) {
	clk := testclock.NewFakeClock(mustTime(t, "2010-01-01T00:00:00Z"))
	a := certPod("a", "a-uid", "ED25519")
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "plain", UID: "plain-uid"}}
	m, _, _, _ := newTestManager(t, clk, a, plain)
	t.Cleanup(m.queue.ShutDown)

	m.TrackPod(t.Context(), plain)
	m.TrackPod(t.Context(), certPod("unknown", "unknown-uid", "ED25519"))
	if n := m.queue.Len(); n != 0 {
		t.Fatalf("queue has %d keys", n)
	}
	m.TrackPod(t.Context(), a)
	if k, _ := m.queue.Get(); k != keyOf(a) {
		t.Fatalf("queued %v", k)
	}
	m.queue.Done(keyOf(a))

	gone := projectionKey{Namespace: "ns1", PodName: "gone", PodUID: "gone-uid", VolumeName: "certificate", SourceIndex: 1}
	m.credStore[gone] = &projectionRecord{curState: &credStateInitial{}}
	m.runRefreshPass(t.Context())
	got := map[projectionKey]bool{}
	for m.queue.Len() > 0 {
		k, _ := m.queue.Get()
		got[k] = true
		m.queue.Done(k)
	}
	if want := map[projectionKey]bool{keyOf(a): true, gone: true}; !reflect.DeepEqual(got, want) {
		t.Errorf("refresh pass queued %v", got)
	}
}

func TestNoOp(t *testing.T) {
	var n Interface = NoOp{}
	n.TrackPod(context.Background(), &v1.Pod{})
	n.ForgetPod(context.Background(), &v1.Pod{})
	if _, _, err := n.GetPodCertificateCredentialBundle(context.Background(), "ns", "p", "u", "v", 0); err == nil || err.Error() != "unimplemented" {
		t.Errorf("error %v", err)
	}
	if r := n.MetricReport(); len(r.PodCertificateStates) != 0 {
		t.Errorf("report %v", r)
	}
}

// checkKeyMatches fails t unless the PEM PKCS#8 key is the key of the
// chain's first certificate.
func checkKeyMatches(t *testing.T, keyPEM, chain []byte) {
	t.Helper()
	kb, rest := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" || len(rest) != 0 {
		t.Fatalf("key is not one PEM PRIVATE KEY block: %q", keyPEM)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(chain)
	if cb == nil {
		t.Fatal("empty chain")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.(crypto.Signer).Public()) {
		t.Error("the certificate is not for the key")
	}
}

// wantEvents fails t unless the recorder got exactly want since the last
// call.
func wantEvents(t *testing.T, rec *record.FakeRecorder, want ...string) {
	t.Helper()
	var got []string
	for len(rec.Events) > 0 {
		got = append(got, <-rec.Events)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events %q, want %q", got, want)
	}
}
