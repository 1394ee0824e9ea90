package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// build compiles the plugin into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "credprovider")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

const request = `{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"reg.example.com/app","serviceAccountToken":"tok","serviceAccountAnnotations":{"example.com/id":"42"}}
`

// runPlugin runs bin with args and stdin, for at most timeout.
func runPlugin(t *testing.T, bin, stdin string, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var o, e bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return o.String(), e.String(), err
}

func TestPlugin(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	password := filepath.Join(dir, "password")
	if err := os.WriteFile(password, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	common := []string{"--registry=*.example.com", "--username=user", "--password-file=" + password, "--log=" + log}

	t.Run("ok", func(t *testing.T) {
		out, stderr, err := runPlugin(t, bin, request, time.Minute, append(common, "--cache-key-type=Image", "--cache-duration=90s")...)
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		var resp credentialproviderv1.CredentialProviderResponse
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&resp); err != nil {
			t.Fatalf("response %q: %v", out, err)
		}
		if resp.APIVersion != "credentialprovider.kubelet.k8s.io/v1" || resp.Kind != "CredentialProviderResponse" ||
			resp.CacheKeyType != credentialproviderv1.ImagePluginCacheKeyType || resp.CacheDuration == nil || resp.CacheDuration.Duration != 90*time.Second ||
			!reflect.DeepEqual(resp.Auth, map[string]credentialproviderv1.AuthConfig{"*.example.com": {Username: "user", Password: "s3cret"}}) {
			t.Errorf("response %+v", resp)
		}

		// Defaults: Registry, no cacheDuration.
		out, stderr, err = runPlugin(t, bin, request, time.Minute, common...)
		if err != nil {
			t.Fatalf("%v: %s", err, stderr)
		}
		resp = credentialproviderv1.CredentialProviderResponse{}
		if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.CacheKeyType != credentialproviderv1.RegistryPluginCacheKeyType || resp.CacheDuration != nil {
			t.Errorf("response %+v (%v)", resp, err)
		}

		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(lines) != 2 || lines[0] != strings.TrimSpace(request) {
			t.Fatalf("log %q", data)
		}
		var req credentialproviderv1.CredentialProviderRequest
		if err := json.Unmarshal([]byte(lines[0]), &req); err != nil || req.ServiceAccountToken != "tok" || req.ServiceAccountAnnotations["example.com/id"] != "42" {
			t.Errorf("logged request %+v (%v)", req, err)
		}
	})

	t.Run("require token", func(t *testing.T) {
		noToken := `{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"reg.example.com/app"}`
		if _, stderr, err := runPlugin(t, bin, noToken, time.Minute, append(common, "--require-token")...); err == nil || !strings.Contains(stderr, "no serviceAccountToken") {
			t.Errorf("without a token: %v, %q", err, stderr)
		}
		if _, stderr, err := runPlugin(t, bin, request, time.Minute, append(common, "--require-token")...); err != nil {
			t.Errorf("with a token: %v, %q", err, stderr)
		}
	})

	t.Run("wrong apiVersion", func(t *testing.T) {
		old := strings.Replace(request, "/v1\"", "/v1beta1\"", 1)
		if _, stderr, err := runPlugin(t, bin, old, time.Minute, common...); err == nil || !strings.Contains(stderr, "want credentialprovider.kubelet.k8s.io/v1") {
			t.Errorf("%v, %q", err, stderr)
		}
	})

	t.Run("crash", func(t *testing.T) {
		_, stderr, err := runPlugin(t, bin, request, time.Minute, append(common, "--mode=crash")...)
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(stderr, "crashing") {
			t.Errorf("%v, %q", err, stderr)
		}
	})

	t.Run("garbage", func(t *testing.T) {
		out, _, err := runPlugin(t, bin, request, time.Minute, append(common, "--mode=garbage")...)
		if err != nil || json.Valid([]byte(out)) || out == "" {
			t.Errorf("%v, %q", err, out)
		}
	})

	t.Run("hang", func(t *testing.T) {
		if _, _, err := runPlugin(t, bin, request, 300*time.Millisecond, append(common, "--mode=hang")...); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v, want the timeout", err)
		}
	})
}
