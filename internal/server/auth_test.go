package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// newCA makes a CA and a function that signs client certificates with it.
func newCA(t *testing.T, name string) (caPEM []byte, sign func(cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	serial := int64(2)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), func(cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		serial++
		c := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: orgs},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		}
		d, err := x509.CreateCertificate(rand.Reader, c, ca, &k.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := x509.ParseCertificate(d)
		return out
	}
}

// reviewClient answers TokenReviews from tokens and SubjectAccessReviews
// from allowed (user/subresource), counting the calls.
func reviewClient(tokens map[string]string, allowed map[string]bool, calls map[string]int, fail *error) *fake.Clientset {
	c := fake.NewSimpleClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls["token"]++
		if *fail != nil {
			return true, nil, *fail
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if u, ok := tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"team"}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls["sar"]++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		if ra.Resource != "nodes" || ra.Version != "v1" || ra.Name != "n1" {
			return true, nil, errors.New("unexpected attributes")
		}
		sar.Status.Allowed = allowed[sar.Spec.User+"/"+ra.Subresource]
		return true, sar, nil
	})
	return c
}

func TestAuthenticationAndAuthorization(t *testing.T) {
	caPEM, sign := newCA(t, "cluster-ca")
	_, signOther := newCA(t, "other-ca")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	var fail error
	client := reviewClient(map[string]string{"good": "alice"},
		map[string]bool{"alice/proxy": true, "apiserver/proxy": true, "system:anonymous/healthz": true}, calls, &fail)
	authn := kubeletv1beta1.KubeletAuthentication{
		X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
		Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
		Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
	}
	authn.Webhook.CacheTTL.Duration = time.Minute
	authz := kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook}
	authz.Webhook.CacheAuthorizedTTL.Duration = time.Minute
	authz.Webhook.CacheUnauthorizedTTL.Duration = time.Minute
	a, warnings, err := newAuth("n1", client, authn, authz)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("newAuth: %v %v", err, warnings)
	}
	h := a.filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	serve := func(path, token string, certs ...*x509.Certificate) int {
		r := httptest.NewRequest("GET", path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if len(certs) > 0 {
			r.TLS = &tls.ConnectionState{PeerCertificates: certs}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for _, tc := range []struct {
		name  string
		path  string
		token string
		cert  *x509.Certificate
		want  int
	}{
		{"client certificate of the cluster CA", "/exec/ns/p/c", "", sign("apiserver", []string{"system:masters"}, x509.ExtKeyUsageClientAuth), http.StatusOK},
		{"certificate of another CA", "/exec/ns/p/c", "", signOther("apiserver", nil, x509.ExtKeyUsageClientAuth), http.StatusUnauthorized},
		{"server-only certificate", "/exec/ns/p/c", "", sign("apiserver", nil, x509.ExtKeyUsageServerAuth), http.StatusUnauthorized},
		{"bad certificate, good token", "/exec/ns/p/c", "good", signOther("x", nil, x509.ExtKeyUsageClientAuth), http.StatusOK},
		{"good token", "/pods", "good", nil, http.StatusOK},
		{"good token, no rights", "/metrics", "good", nil, http.StatusForbidden},
		{"bad token is 401 even with anonymous on", "/healthz", "bad", nil, http.StatusUnauthorized},
		{"anonymous, allowed", "/healthz", "", nil, http.StatusOK},
		{"anonymous, not allowed", "/pods", "", nil, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var certs []*x509.Certificate
			if tc.cert != nil {
				certs = append(certs, tc.cert)
			}
			if got := serve(tc.path, tc.token, certs...); got != tc.want {
				t.Fatalf("GET %s: %d, want %d", tc.path, got, tc.want)
			}
		})
	}

	// Answers are cached: the same token and check again cost no call.
	before := map[string]int{"token": calls["token"], "sar": calls["sar"]}
	if got := serve("/pods", "good", nil...); got != http.StatusOK {
		t.Fatalf("cached: %d", got)
	}
	if calls["token"] != before["token"] || calls["sar"] != before["sar"] {
		t.Fatalf("cached answers asked again: %v -> %v", before, calls)
	}

	// The API server failing: a 500 after the retries, never a 200.
	fail = apierrors.NewInternalError(errors.New("etcd down"))
	webhookBackoff.Duration, webhookBackoff.Steps = time.Millisecond, 2
	if got := serve("/pods", "another", nil...); got != http.StatusUnauthorized {
		t.Fatalf("token review failing: %d, want 401", got)
	}
}

func TestAuthenticatedGroup(t *testing.T) {
	u := authenticated(&userInfo{Name: "a", Groups: []string{"g"}})
	if len(u.Groups) != 2 || u.Groups[1] != "system:authenticated" {
		t.Fatalf("groups %v", u.Groups)
	}
	if again := authenticated(u); len(again.Groups) != 2 {
		t.Fatalf("added twice: %v", again.Groups)
	}
}

func TestSubjectAccessReviewCacheTTLs(t *testing.T) {
	calls := map[string]int{}
	var fail error
	client := reviewClient(nil, map[string]bool{"bob/stats": true}, calls, &fail)
	s := &accessReviewer{client: client, allowTTL: time.Hour, denyTTL: 0, cache: cache.NewLRUExpireCache(16)}
	bob := &userInfo{Name: "bob", Groups: []string{"b", "a"}}
	for i := 0; i < 3; i++ {
		if ok, err := s.authorize(context.Background(), bob, attributes{Verb: "get", Subresource: "stats", Name: "n1"}); !ok || err != nil {
			t.Fatalf("stats: %v %v", ok, err)
		}
		if ok, err := s.authorize(context.Background(), bob, attributes{Verb: "get", Subresource: "proxy", Name: "n1"}); ok || err != nil {
			t.Fatalf("proxy: %v %v", ok, err)
		}
	}
	// Allowed cached for an hour (1 call); denied not cached (3 calls).
	if calls["sar"] != 4 {
		t.Fatalf("%d SubjectAccessReviews, want 4", calls["sar"])
	}
}

func TestReviewKeyKeepsIdentitiesApart(t *testing.T) {
	spec := func(groups ...string) authzv1.SubjectAccessReviewSpec {
		return authzv1.SubjectAccessReviewSpec{User: "u", Groups: groups, ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Subresource: "proxy"}}
	}
	if reviewKey(spec("a,b", "c")) == reviewKey(spec("a", "b", "c")) {
		t.Fatal("groups [a,b c] and [a b c] share a cache key")
	}
	if reviewKey(spec("a")) != reviewKey(spec("a")) {
		t.Fatal("the same review has two keys")
	}
}
