package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	critesting "k8s.io/cri-api/pkg/apis/testing"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// /logs/ as the configuration asks: the log directory, node log queries
// with enableSystemLogQuery, upstream's 405 when turned off.
func TestLogsEndpoint(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.log"), []byte("app's log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		debug, handler *bool
		query          bool
		target         string
		wantCode       int
		want           string
	}{
		{name: "file", target: "/logs/app.log", wantCode: 200, want: "app's log"},
		{name: "query ignored without enableSystemLogQuery", target: "/logs/?query=/app.log", wantCode: 200, want: `href="app.log"`},
		{name: "file query", query: true, target: "/logs/?query=/app.log", wantCode: 200, want: "app's log"},
		{name: "refused query", query: true, target: "/logs/?query", wantCode: 400, want: "may not be empty"},
		{name: "handler off", handler: ptr.To(false), target: "/logs/app.log", wantCode: 405, want: "logs endpoint is disabled."},
		{name: "debugging off", debug: ptr.To(false), target: "/logs/app.log", wantCode: 405, want: "Debug endpoints are disabled."},
		{name: "debugging off, exec", debug: ptr.To(false), target: "/exec/ns/pod/c?command=ls", wantCode: 405, want: "Debug endpoints are disabled."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := &kubeletv1beta1.KubeletConfiguration{
				Authorization:           kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
				EnableDebuggingHandlers: tc.debug, EnableSystemLogHandler: tc.handler, EnableSystemLogQuery: ptr.To(tc.query),
			}
			s, err := New(Config{Kubelet: kc, Pods: noPods{}, Runtime: critesting.NewFakeRuntimeService(), PodRuntime: fakePodRuntime{}, LogDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%d %q, want %d with %q", rec.Code, rec.Body, tc.wantCode, tc.want)
			}
		})
	}
	kc := &kubeletv1beta1.KubeletConfiguration{
		Authorization:        kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		EnableSystemLogQuery: ptr.To(true),
	}
	if _, err := New(Config{Kubelet: kc, Pods: noPods{}, Runtime: critesting.NewFakeRuntimeService(), PodRuntime: fakePodRuntime{}}); err == nil ||
		!strings.Contains(err.Error(), "enableSystemLogQuery") {
		t.Fatalf("enableSystemLogQuery without a log directory: %v", err)
	}
}
