package nodelog

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeJournalctl writes a journalctl that knows the units in UNITS and
// prints its arguments, one per line, for any other call.
func fakeJournalctl(t *testing.T, units string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "journalctl")
	script := "#!/bin/sh\nif [ \"$1\" = --field ]; then printf '" + units + "'; exit 0; fi\nfor a; do echo \"$a\"; done\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"foo.log": "foo's log\n", "legacy.log": "legacy's log\n", "sub/sub.log": "sub's log\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Config{LogDir: dir, Journalctl: fakeJournalctl(t, `nodelet.service\\ncontainerd.service\\n`)})
	if err != nil {
		t.Fatal(err)
	}
	srv := http.StripPrefix("/logs/", h)
	for _, tc := range []struct {
		name     string
		target   string
		wantCode int
		want     []string
	}{
		{name: "directory", target: "/logs/", wantCode: 200, want: []string{`href="foo.log"`}},
		{name: "plain file", target: "/logs/foo.log", wantCode: 200, want: []string{"foo's log"}},
		{name: "file query", target: "/logs/?query=/foo.log", wantCode: 200, want: []string{"foo's log"}},
		{name: "journal", target: "/logs/?query=nodelet&tailLines=3&pattern=Pod", wantCode: 200,
			want: []string{"--utc\n--no-pager\n--output=short-precise\n--pager-end\n--lines=3\n--unit=nodelet\n--grep=Pod\n"}},
		{name: "two units", target: "/logs/?query=nodelet&query=containerd", wantCode: 200, want: []string{"--unit=nodelet\n--unit=containerd\n"}},
		{name: "service's file", target: "/logs/?query=legacy", wantCode: 200, want: []string{"legacy's log"}},
		{name: "service's folder", target: "/logs/?query=sub", wantCode: 200, want: []string{"sub's log"}},
		{name: "no log", target: "/logs/?query=kubelet", wantCode: 200, want: []string{"\nlog not found for kubelet\n"}},
		{name: "file service with options", target: "/logs/?query=legacy&tailLines=1", wantCode: 200,
			want: []string{"options present and query resolved to log files for [legacy]\ntry without specifying options"}},
		{name: "empty", target: "/logs/?query", wantCode: 400, want: []string{"may not be empty"}},
		{name: "bad time", target: "/logs/?query=nodelet&sinceTime=now", wantCode: 400, want: []string{"invalid time format"}},
		{name: "path and query", target: "/logs/foo.log?query=nodelet", wantCode: 406, want: []string{"path not allowed in query mode"}},
		{name: "unsafe", target: "/logs/?query=nodelet%20-o%20json", wantCode: 406, want: []string{"unsupported characters"}},
		{name: "escape", target: "/logs/?query=../../etc/passwd", wantCode: 406, want: []string{"path escapes from parent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Fatalf("body %q, want %q in it", rec.Body, w)
				}
			}
		})
	}
	t.Run("gzip", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/logs/?query=nodelet", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Content-Type") != "text/plain;charset=UTF-8" {
			t.Fatalf("headers %v", rec.Header())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		if !strings.Contains(string(b), "--unit=nodelet") {
			t.Fatalf("body %q", b)
		}
	})
	t.Run("no journalctl", func(t *testing.T) {
		h, err := New(Config{LogDir: dir, Journalctl: filepath.Join(dir, "missing")})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		http.StripPrefix("/logs/", h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/logs/?query=foo", nil))
		if !strings.Contains(rec.Body.String(), "foo's log") {
			t.Fatalf("without journald a service falls back to its file: %q", rec.Body)
		}
	})
}

func TestNew(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without LogDir: no error")
	}
}
