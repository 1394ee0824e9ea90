package manifesturl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:1/pods", NodeName: "n1", Period: time.Second}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no URL", Config: with(func(c *Config) { c.URL = "" }), WantErr: "Config.URL is required"},
		{Name: "no node name", Config: with(func(c *Config) { c.NodeName = "" }), WantErr: "Config.NodeName is required"},
		{Name: "no period", Config: with(func(c *Config) { c.Period = 0 }), WantErr: "Config.Period must be positive"},
		{Name: "not http", Config: with(func(c *Config) { c.URL = "file:///etc/pods" }), WantErr: "neither http nor https"},
		{Name: "not a URL", Config: with(func(c *Config) { c.URL = "http://[::1" }), WantErr: "manifesturl:"},
		{Name: "defaults", Config: ok},
	}, func(t *testing.T, s *Source) {
		ctortest.RealClock(t, s.cfg.Clock)
		if s.cfg.Client == nil || s.cfg.Client.Timeout != Timeout {
			t.Errorf("client %+v, want one with a %v timeout", s.cfg.Client, Timeout)
		}
	})
}

// server answers with its current status and body and records the headers
// of each request.
type server struct {
	mu      sync.Mutex
	status  int
	body    string
	headers []http.Header
}

func (s *server) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headers = append(s.headers, r.Header.Clone())
	w.WriteHeader(s.status)
	_, _ = w.Write([]byte(s.body))
}

func pod(name, image string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: c\n    image: " + image + "\n"
}

func newSource(t *testing.T) (*Source, *server, *testingclock.FakeClock) {
	t.Helper()
	srv := &server{status: http.StatusOK}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC))
	h := http.Header{}
	h.Add("Authorization", "Bearer t")
	h.Add("X-Custom", "a")
	h.Add("X-Custom", "b")
	s, err := New(Config{URL: ts.URL + "/pods", Header: h, NodeName: "n1", Period: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s, srv, clk
}

// sent is what one poll put on the channel: nil when nothing.
func sent(s *Source) (pods []*v1.Pod, ok bool) {
	select {
	case pods = <-s.updates:
		return pods, true
	default:
		return nil, false
	}
}

func names(pods []*v1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name+"/"+p.Spec.Containers[0].Image)
	}
	return strings.Join(n, ",")
}

// TestPoll: upstream's URL source, answer by answer.
func TestPoll(t *testing.T) {
	s, srv, clk := newSource(t)
	ctx := context.Background()
	step := func(status int, body string) {
		t.Helper()
		srv.set(status, body)
		s.poll(ctx)
	}
	expect := func(what, want string) {
		t.Helper()
		pods, ok := sent(s)
		switch {
		case want == "-" && ok:
			t.Fatalf("%s: sent %q, want nothing", what, names(pods))
		case want != "-" && !ok:
			t.Fatalf("%s: sent nothing, want %q", what, want)
		case want != "-" && names(pods) != want:
			t.Fatalf("%s: sent %q, want %q", what, names(pods), want)
		}
	}

	// The URL fails before it ever answered: nothing sent, so the source
	// is not seen.
	step(http.StatusServiceUnavailable, "down")
	expect("503 first", "-")

	step(http.StatusOK, pod("web", "busybox:1.36"))
	expect("a pod", "web-n1/busybox:1.36")
	if got := srv.headers[len(srv.headers)-1]; got.Get("Authorization") != "Bearer t" || strings.Join(got.Values("X-Custom"), ",") != "a,b" {
		t.Errorf("request headers %v, want staticPodURLHeader's", got)
	}

	s.poll(ctx)
	expect("the same answer", "-")

	// Failures keep the last answer's pods: nothing is sent.
	for _, bad := range []struct {
		what   string
		status int
		body   string
	}{
		{"500", http.StatusInternalServerError, pod("other", "busybox:1.36")},
		{"not YAML", http.StatusOK, "kind: Pod\nmetadata: {name: [\n"},
		{"invalid pod", http.StatusOK, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n"},
		{"a Service", http.StatusOK, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"},
	} {
		step(bad.status, bad.body)
		expect(bad.what, "-")
	}
	// The same bad answer again is still a failure, not a good read.
	s.poll(ctx)
	expect("the same Service again", "-")
	if s.failures != 5 {
		t.Errorf("failures %d, want 5", s.failures)
	}

	// A list, then two documents; a good answer resets the failures. The
	// first-seen time of a pod still there is kept.
	clk.Step(time.Minute)
	step(http.StatusOK, `{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}},{"metadata":{"name":"db"},"spec":{"containers":[{"name":"c","image":"busybox:1.37"}]}}]}`)
	pods, ok := sent(s)
	if !ok || len(pods) != 2 || s.failures != 0 {
		t.Fatalf("list: sent %v %q, failures %d", ok, names(pods), s.failures)
	}
	for _, p := range pods {
		want := "2026-12-08T00:01:00Z"
		if p.Name == "web-n1" {
			want = "2026-12-08T00:00:00Z"
		}
		if got := p.Annotations["kubernetes.io/config.seen"]; got != want {
			t.Errorf("%s first seen %q, want %q", p.Name, got, want)
		}
		if p.Annotations["kubernetes.io/config.source"] != "http" || p.Spec.NodeName != "n1" || len(p.Spec.Tolerations) != 0 {
			t.Errorf("%s not a URL static pod: %v, node %q, tolerations %v", p.Name, p.Annotations, p.Spec.NodeName, p.Spec.Tolerations)
		}
	}

	// A name twice: the duplicate is dropped.
	step(http.StatusOK, "---\n"+pod("web", "busybox:1.36")+"---\n"+pod("web", "busybox:1.37"))
	expect("a name twice", "web-n1/busybox:1.36")

	// An empty answer removes the pods, once.
	step(http.StatusOK, "")
	expect("empty", "")
	step(http.StatusOK, "")
	expect("empty again", "-")
	step(http.StatusOK, `{"apiVersion":"v1","kind":"PodList","items":[]}`)
	expect("an empty list after an empty answer", "-")

	// The pod of the first answer comes back: it is seen anew.
	clk.Step(time.Minute)
	step(http.StatusOK, pod("web", "busybox:1.36"))
	expect("back", "web-n1/busybox:1.36")
	if got := onlySeen(t, s); got != "2026-12-08T00:02:00Z" {
		t.Errorf("a pod back after the empty answer has the first-seen time %q, want now", got)
	}
}

// onlySeen is the first-seen time the source keeps for its only pod.
func onlySeen(t *testing.T, s *Source) string {
	t.Helper()
	if len(s.seen) != 1 {
		t.Fatalf("seen %v, want one pod", s.seen)
	}
	for _, ts := range s.seen {
		return ts
	}
	return ""
}

// TestAnswerTooLong: an answer over MaxLength is refused, the pods kept.
func TestAnswerTooLong(t *testing.T) {
	s, srv, _ := newSource(t)
	srv.set(http.StatusOK, pod("web", "busybox:1.36"))
	s.poll(context.Background())
	if _, ok := sent(s); !ok {
		t.Fatal("no first set")
	}
	srv.set(http.StatusOK, pod("web", "busybox:1.36")+"# "+strings.Repeat("x", MaxLength)+"\n")
	if err := s.read(context.Background()); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("error %v, want the answer refused as too long", err)
	}
	if _, ok := sent(s); ok {
		t.Error("a too long answer was sent")
	}
}

// TestRunPolls: Run reads at once, then every period.
func TestRunPolls(t *testing.T) {
	s, srv, clk := newSource(t)
	srv.set(http.StatusOK, pod("web", "busybox:1.36"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	recv := func() string {
		t.Helper()
		select {
		case pods := <-s.Updates():
			return names(pods)
		case <-time.After(10 * time.Second):
			t.Fatal("no update")
			return ""
		}
	}
	if got := recv(); got != "web-n1/busybox:1.36" {
		t.Fatalf("first set %q", got)
	}
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond) // Run makes its ticker after the first read
	}
	srv.set(http.StatusOK, pod("web", "busybox:1.37"))
	clk.Step(20 * time.Second)
	if got := recv(); got != "web-n1/busybox:1.37" {
		t.Fatalf("second set %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
