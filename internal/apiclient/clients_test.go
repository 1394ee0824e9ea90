package apiclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNew(t *testing.T) {
	path := kubeconfig(t, "http://127.0.0.1:1")
	full := Config{KubeconfigPath: path, NodeName: "n1", CertDir: t.TempDir()}
	without := func(f func(*Config)) Config { c := full; f(&c); return c }
	ctortest.Run(t, func(c Config) (*Clients, error) { return New(t.Context(), c) }, []ctortest.Case[Config]{
		{Name: "no kubeconfig", Config: without(func(c *Config) { c.KubeconfigPath = "" }), WantErr: "Config.KubeconfigPath is required"},
		{Name: "no node name", Config: without(func(c *Config) { c.NodeName = "" }), WantErr: "Config.NodeName is required"},
		{Name: "no cert dir", Config: without(func(c *Config) { c.CertDir = "" }), WantErr: "Config.CertDir is required"},
		{Name: "a kubeconfig that is not there", Config: without(func(c *Config) { c.KubeconfigPath = "/nonexistent" }), WantErr: "kubeconfig /nonexistent"},
		{Name: "complete", Config: full},
	}, func(t *testing.T, c *Clients) {
		if c.clientCerts != nil {
			t.Error("a client certificate manager without rotateCertificates")
		}
		// Without rotation Run has nothing to do.
		if err := c.Run(t.Context()); err != nil {
			t.Error(err)
		}
	})
}

// The main client sends nodelet's user agent and protobuf, through the
// wrapped transport; the events client is not wrapped.
func TestClients(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer srv.Close()
	wrapped := 0
	c, err := New(t.Context(), Config{KubeconfigPath: kubeconfig(t, srv.URL), NodeName: "n1", CertDir: t.TempDir(), QPS: 50, Burst: 100,
		Wrap: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) { wrapped++; return rt.RoundTrip(r) })
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.API.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	_, _ = c.Events.Events("default").Create(t.Context(), &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d requests, want 2", len(seen))
	}
	for _, r := range seen {
		if ua := r.Header.Get("User-Agent"); ua != "nodelet/n1" {
			t.Errorf("%s %s: user agent %q", r.Method, r.URL.Path, ua)
		}
		if got := r.Header.Get("Accept"); got != "application/vnd.kubernetes.protobuf,application/json" {
			t.Errorf("%s %s: accept %q", r.Method, r.URL.Path, got)
		}
	}
	if wrapped != 1 {
		t.Errorf("wrapped transport saw %d requests, want the main client's 1", wrapped)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The lease controller, run through LeaseClientset, creates and renews the
// node's Lease without calling a group nodelet does not build.
func TestLeaseClientset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
		var narrow Interface = fc
		lc := lease.NewController(clock.RealClock{}, LeaseClientset(narrow), "n1", 40, func() {}, 10*time.Second, "n1",
			v1.NamespaceNodeLease, func(l *coordinationv1.Lease) error {
				node, err := narrow.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
				if err != nil {
					return err
				}
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
				return nil
			})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { lc.Run(ctx); close(done) }()
		time.Sleep(25 * time.Second) // two renewals in bubble time
		synctest.Wait()
		cancel()
		<-done
		l, err := fc.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(t.Context(), "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "n1" || len(l.OwnerReferences) != 1 {
			t.Errorf("lease %+v", l)
		}
	})
}
