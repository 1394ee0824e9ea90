package healthz

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandler(t *testing.T) {
	var broken error
	h := Handler(
		Check{Name: "runtime", Fn: func() error { return broken }},
		Check{Name: "offline", Fn: func() error { return nil }, Info: func() string { return "API server unreachable for 5s" }},
	)
	get := func(url string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	want := "[+]runtime ok\n[+]offline ok: API server unreachable for 5s\nhealthz check passed\n"
	if code, body := get("/healthz?verbose"); code != 200 || body != want {
		t.Errorf("/healthz?verbose: %d %q, want %q", code, body, want)
	}
	broken = errors.New("no runtime")
	want = "[-]runtime failed: no runtime\n[+]offline ok: API server unreachable for 5s\nhealthz check failed\n"
	if code, body := get("/healthz"); code != 500 || body != want {
		t.Errorf("/healthz, failing: %d %q, want %q", code, body, want)
	}
}
