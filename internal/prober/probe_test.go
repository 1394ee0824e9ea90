package prober

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// HTTP probes: 2xx passes, 4xx fails, a redirect on the same host is
// followed, one to another host is a success with a Warning carrying the
// body (upstream's "Probe terminated redirects").
func TestHTTPGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/local":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://0.0.0.0/", http.StatusFound)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	target := Target{Container: &v1.Container{Name: "c"}, PodIP: "127.0.0.1"}
	get := func(path string) error {
		_, err := (&Runner{}).HTTPGet(context.Background(), target, &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(p))}, time.Second)
		return err
	}
	if err := get("/ok"); err != nil {
		t.Errorf("/ok: %v", err)
	}
	if err := get("/local"); err != nil {
		t.Errorf("/local (redirect on the same host): %v", err)
	}
	if err := get("/missing"); err == nil {
		t.Error("/missing passed")
	}
	var w Warning
	if err := get("/away"); !errors.As(err, &w) || string(w) != `Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`+"\n\n" {
		t.Errorf("/away: %v", err)
	}
	hook := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/away", Port: intstr.FromInt32(int32(p))}}
	if _, err := (&Runner{}).Hook(context.Background(), target, hook, time.Second); err != nil {
		t.Errorf("hook redirected elsewhere: %v", err)
	}
}
