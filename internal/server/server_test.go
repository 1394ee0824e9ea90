package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSubresourceAndVerb(t *testing.T) {
	cases := []struct {
		method, path string
		want         []string // subresources checked, in order
		verb         string
	}{
		{"GET", "/stats/summary", []string{"stats"}, "get"},
		{"GET", "/metrics", []string{"metrics"}, "get"},
		{"GET", "/metrics/probes", []string{"metrics"}, "get"},
		{"GET", "/logs/syslog", []string{"log"}, "get"},
		{"GET", "/pods", []string{"pods", "proxy"}, "get"},
		{"GET", "/healthz", []string{"healthz", "proxy"}, "get"},
		{"GET", "/configz", []string{"configz", "proxy"}, "get"},
		{"GET", "/podsX", []string{"proxy"}, "get"},
		{"POST", "/exec/ns/p/c", []string{"proxy"}, "create"},
		{"GET", "/containerLogs/ns/p/c", []string{"proxy"}, "get"},
		{"GET", "/runningpods/", []string{"pods", "proxy"}, "get"},
		{"GET", "/flagz", []string{"configz"}, "get"},
		{"GET", "/statusz", []string{"statusz"}, "get"},
		{"PUT", "/x", []string{"proxy"}, "update"},
		{"DELETE", "/x", []string{"proxy"}, "delete"},
	}
	a := &auth{nodeName: "n1"}
	for _, tc := range cases {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		attrs := a.attributes(r)
		var got []string
		for _, at := range attrs {
			got = append(got, at.Subresource)
			if at.Verb != tc.verb || at.Name != "n1" || at.Path != tc.path {
				t.Errorf("%s %s: attributes %+v", tc.method, tc.path, at)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

type fakeAuthn struct{ user string }

func (f fakeAuthn) authenticate(*http.Request) (*userInfo, bool, error) {
	if f.user == "" {
		return nil, false, nil
	}
	return &userInfo{Name: f.user}, true, nil
}

// fakeAuthz allows the listed subresources.
type fakeAuthz map[string]bool

func (f fakeAuthz) authorize(_ context.Context, _ *userInfo, a attributes) (bool, error) {
	return f[a.Subresource], nil
}

func TestFilter(t *testing.T) {
	cases := []struct {
		name    string
		user    string
		allowed []string
		path    string
		want    int
	}{
		{"unauthenticated", "", []string{"proxy"}, "/pods", http.StatusUnauthorized},
		{"no rights", "bob", nil, "/pods", http.StatusForbidden},
		{"pods via proxy fallback", "bob", []string{"proxy"}, "/pods", http.StatusOK},
		{"pods via pods", "bob", []string{"pods"}, "/pods", http.StatusOK},
		{"metrics need metrics", "bob", []string{"proxy"}, "/metrics", http.StatusForbidden},
		{"metrics", "bob", []string{"metrics"}, "/metrics", http.StatusOK},
		{"exec needs proxy", "bob", []string{"pods", "stats"}, "/exec/a/b/c", http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allowed := fakeAuthz{}
			for _, s := range tc.allowed {
				allowed[s] = true
			}
			a := &auth{nodeName: "n1", authn: fakeAuthn{tc.user}, authz: allowed}
			h := a.filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.want {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, rec.Code, rec.Body.String(), tc.want)
			}
		})
	}
}

func TestDecodeAndValidateLogOptions(t *testing.T) {
	since := "2026-01-02T03:04:05Z"
	cases := []struct {
		query   string
		check   func(*v1.PodLogOptions) bool
		decErr  bool
		invalid bool
	}{
		{query: "follow=true&tailLines=3&timestamps=1&previous=false", check: func(o *v1.PodLogOptions) bool {
			return o.Follow && *o.TailLines == 3 && o.Timestamps && !o.Previous
		}},
		{query: "sinceSeconds=5&limitBytes=10", check: func(o *v1.PodLogOptions) bool { return *o.SinceSeconds == 5 && *o.LimitBytes == 10 }},
		{query: "sinceTime=" + since, check: func(o *v1.PodLogOptions) bool { return o.SinceTime.UTC().Format(time.RFC3339) == since }},
		{query: "stream=Stdout", check: func(o *v1.PodLogOptions) bool { return *o.Stream == v1.LogStreamStdout }},
		{query: "tailLines=x", decErr: true},
		{query: "follow=maybe", decErr: true},
		{query: "sinceTime=yesterday", decErr: true},
		{query: "tailLines=-1", invalid: true},
		{query: "limitBytes=0", invalid: true},
		{query: "sinceSeconds=0", invalid: true},
		{query: "sinceSeconds=1&sinceTime=" + since, invalid: true},
		{query: "stream=Stdout&tailLines=1", invalid: true},
		{query: "stream=Both", invalid: true},
	}
	for _, tc := range cases {
		q, _ := url.ParseQuery(tc.query)
		o, err := decodeLogOptions(q)
		if (err != nil) != tc.decErr {
			t.Errorf("%s: decode error %v", tc.query, err)
			continue
		}
		if err != nil {
			continue
		}
		if verr := validateLogOptions(o); (verr != nil) != tc.invalid {
			t.Errorf("%s: validation %v", tc.query, verr)
		}
		if tc.check != nil && !tc.check(o) {
			t.Errorf("%s: decoded %+v", tc.query, o)
		}
	}
}

func TestCRILogOptionsSince(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := criLogOptions(&v1.PodLogOptions{SinceSeconds: ptr.To[int64](60), TailLines: ptr.To[int64](4)}, now)
	if !o.Since.Equal(now.Add(-time.Minute)) || *o.TailLines != 4 {
		t.Fatalf("sinceSeconds: %+v", o)
	}
}

func TestParseStreamOptions(t *testing.T) {
	cases := []struct {
		query string
		want  streamOptions
		err   bool
	}{
		{"output=1&error=1", streamOptions{stdout: true, stderr: true}, false},
		{"input=1&output=1&tty=1&error=1", streamOptions{stdin: true, stdout: true, tty: true}, false}, // tty merges stderr
		{"input=true", streamOptions{stdin: true}, false},
		{"tty=1", streamOptions{}, true},
		{"stdout=1", streamOptions{}, true}, // not the kubelet's parameter name
	}
	for _, tc := range cases {
		r := httptest.NewRequest("POST", "/exec/a/b/c?"+tc.query, nil)
		got, err := parseStreamOptions(r)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("%s: %+v %v, want %+v err=%v", tc.query, got, err, tc.want, tc.err)
		}
	}
}

// The paths /statusz lists: each handler's path without its method,
// wildcards or trailing slash, once.
func TestPathsMuxRecord(t *testing.T) {
	m := &pathsMux{ServeMux: http.NewServeMux()}
	for _, p := range []string{"GET /configz", "/metrics/probes", "/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}", "GET /logs/", "/debug/pprof/", "/"} {
		m.record(p)
	}
	want := []string{"/configz", "/metrics/probes", "/exec", "/logs", "/debug/pprof", "/"}
	if !slices.Equal(m.paths, want) {
		t.Errorf("paths %q, want %q", m.paths, want)
	}
}
