package credentialprovider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

// writeFile writes name (mode) in dir.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

const okResponse = `{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.r.io":{"username":"u","password":"p"}}}`

// scriptPlugin is a plugin that appends its request (stdin) to $REQ_LOG
// and its arguments to $ARGS_LOG, then runs body.
func scriptPlugin(body string) string {
	return "#!/bin/sh\ncat >> \"$REQ_LOG\"\necho \"$@\" >> \"$ARGS_LOG\"\n" + body + "\n"
}

func answer(response string) string {
	return "cat <<'EOF'\n" + response + "\nEOF"
}

const oneProvider = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: ok
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["*.r.io"]
  defaultCacheDuration: 10m
`

func TestNew(t *testing.T) {
	bin := t.TempDir()
	writeFile(t, bin, "ok", scriptPlugin(answer(okResponse)), 0o755)
	writeFile(t, bin, "notexec", "", 0o644)
	cfgDir := t.TempDir()
	good := writeFile(t, cfgDir, "good.yaml", oneProvider, 0o644)
	missingBin := writeFile(t, cfgDir, "missing.yaml", strings.ReplaceAll(oneProvider, "name: ok", "name: absent"), 0o644)
	notExec := writeFile(t, cfgDir, "notexec.yaml", strings.ReplaceAll(oneProvider, "name: ok", "name: notexec"), 0o644)
	invalid := writeFile(t, cfgDir, "invalid.yaml", strings.ReplaceAll(oneProvider, "  defaultCacheDuration: 10m\n", ""), 0o644)
	tokenAttrs := writeFile(t, cfgDir, "token.yaml", oneProvider+`  tokenAttributes:
    serviceAccountTokenAudience: aud
    cacheType: ServiceAccount
    requireServiceAccount: true
`, 0o644)

	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "valid", Config: Config{ConfigPath: good, BinDir: bin}},
		{Name: "tokenAttributes without Tokens", Config: Config{ConfigPath: tokenAttrs, BinDir: bin}},
		{Name: "no bin dir", Config: Config{ConfigPath: good}, WantErr: "Config.BinDir"},
		{Name: "no config", Config: Config{BinDir: bin}, WantErr: "Config.ConfigPath"},
		{Name: "bin dir missing", Config: Config{ConfigPath: good, BinDir: filepath.Join(bin, "nope")}, WantErr: "plugin binary directory " + filepath.Join(bin, "nope") + " did not exist"},
		{Name: "config missing", Config: Config{ConfigPath: filepath.Join(cfgDir, "nope.yaml"), BinDir: bin}, WantErr: "unable to access path"},
		{Name: "invalid config", Config: Config{ConfigPath: invalid, BinDir: bin}, WantErr: "failed to validate credential provider config: providers.defaultCacheDuration: Required value"},
		{Name: "binary missing", Config: Config{ConfigPath: missingBin, BinDir: bin}, WantErr: "plugin binary executable " + filepath.Join(bin, "absent") + " did not exist"},
		{Name: "binary not executable", Config: Config{ConfigPath: notExec, BinDir: bin}, WantErr: "error inspecting binary executable"},
	}, func(t *testing.T, p *Providers) {
		if len(p.providers) != 1 {
			t.Fatalf("%d providers", len(p.providers))
		}
		ctortest.RealClock(t, p.providers[0].clock)
		if p.providers[0].serviceAccountProvider != nil {
			if _, ok := p.providers[0].serviceAccountProvider.tokens.(standaloneTokens); !ok {
				t.Errorf("Tokens defaults to %T", p.providers[0].serviceAccountProvider.tokens)
			}
		}
	})
}

// execFixture is a bin dir of script plugins and a config of providers.
type execFixture struct {
	bin, config     string
	reqLog, argsLog string
	reg             *prometheus.Registry
	clock           *testingclock.FakeClock
	providers       *Providers
}

func newExecFixture(t *testing.T, plugins map[string]string, config string, tokens TokenGetter) *execFixture {
	t.Helper()
	f := &execFixture{bin: t.TempDir(), reg: prometheus.NewRegistry(), clock: testingclock.NewFakeClock(time.Now())}
	logs := t.TempDir()
	f.reqLog, f.argsLog = filepath.Join(logs, "req"), filepath.Join(logs, "args")
	for name, script := range plugins {
		writeFile(t, f.bin, name, script, 0o755)
	}
	config = strings.ReplaceAll(strings.ReplaceAll(config, "$REQ_LOG", f.reqLog), "$ARGS_LOG", f.argsLog)
	f.config = writeFile(t, t.TempDir(), "config.yaml", config, 0o644)
	p, err := New(Config{ConfigPath: f.config, BinDir: f.bin, Tokens: tokens, Registry: f.reg, Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	f.providers = p
	return f
}

// requests are the requests the plugins were given.
func (f *execFixture) requests(t *testing.T) []credentialproviderv1.CredentialProviderRequest {
	t.Helper()
	data, err := os.ReadFile(f.reqLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []credentialproviderv1.CredentialProviderRequest
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r credentialproviderv1.CredentialProviderRequest
		if _, _, err := codecs.UniversalDeserializer().Decode([]byte(line), nil, &r); err != nil {
			t.Fatalf("request %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func provider(name, matchImage, extra string) string {
	return `- name: ` + name + `
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["` + matchImage + `"]
  defaultCacheDuration: 10m
  env:
  - {name: REQ_LOG, value: "$REQ_LOG"}
  - {name: ARGS_LOG, value: "$ARGS_LOG"}
` + extra
}

// quiet is the test's context, with a logger that discards the
// providers' error logs.
func quiet(t *testing.T) context.Context {
	return klog.NewContext(t.Context(), logr.Discard())
}

const configHead = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"

func TestLookupExec(t *testing.T) {
	f := newExecFixture(t, map[string]string{
		"first":   scriptPlugin(answer(okResponse)),
		"crash":   scriptPlugin("echo boom >&2; exit 1"),
		"garbage": scriptPlugin("echo not json"),
		"version": scriptPlugin(answer(strings.Replace(okResponse, "/v1\"", "/v1beta1\"", 1))),
		"other":   scriptPlugin(answer(okResponse)),
		"last": scriptPlugin(answer(`{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",` +
			`"cacheKeyType":"Image","cacheDuration":"0s","auth":{"a.r.io/img":{"username":"x","password":"y"}}}`)),
	}, configHead+
		provider("first", "*.r.io", "  args: [--one, two]\n")+
		provider("crash", "*.r.io", "")+
		provider("garbage", "*.r.io", "")+
		provider("version", "*.r.io", "")+
		provider("other", "other.io", "")+
		provider("last", "a.r.io", ""), nil)

	ctx := quiet(t)
	results, errs := f.providers.Lookup(ctx, "a.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid"})
	want := []Result{
		{Provider: "first", Auths: map[string]Auth{"*.r.io": {Username: "u", Password: "p"}}},
		{Provider: "last", Auths: map[string]Auth{"a.r.io/img": {Username: "x", Password: "y"}}},
	}
	if !reflect.DeepEqual(results, want) {
		t.Errorf("results %+v, want %+v", results, want)
	}
	wantErrs := map[string]string{
		"crash":   "error execing credential provider plugin crash for image a.r.io/img: exit status 1: boom",
		"garbage": "error reading GVK from response",
		"version": "apiVersion from credential plugin response did not match expected apiVersion:credentialprovider.kubelet.k8s.io/v1, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1",
	}
	if len(errs) != len(wantErrs) {
		t.Errorf("errors %v, want %d", errs, len(wantErrs))
	}
	for _, err := range errs {
		var pe *ProviderError
		if !errors.As(err, &pe) || pe.Image != "a.r.io/img" || !strings.Contains(err.Error(), wantErrs[pe.Provider]) {
			t.Errorf("error %v, want one of %v", err, wantErrs)
		}
	}

	reqs := f.requests(t)
	if len(reqs) != 5 {
		t.Fatalf("%d executions, want 5 (other does not match)", len(reqs))
	}
	wantReq := credentialproviderv1.CredentialProviderRequest{TypeMeta: metav1.TypeMeta{Kind: "CredentialProviderRequest", APIVersion: "credentialprovider.kubelet.k8s.io/v1"}, Image: "a.r.io/img"}
	if !reflect.DeepEqual(reqs[0], wantReq) {
		t.Errorf("request %+v, want %+v", reqs[0], wantReq)
	}
	if args, _ := os.ReadFile(f.argsLog); !strings.HasPrefix(string(args), "--one two\n") {
		t.Errorf("first plugin's args %q", args)
	}

	// Errors are counted for failed executions (not for bad responses, as
	// upstream); every execution is timed.
	if got := testutil.ToFloat64(f.providers.providers[1].plugin.(*execPlugin).metrics.errors.WithLabelValues("crash")); got != 1 {
		t.Errorf("crash errors %v", got)
	}
	if n, err := testutil.GatherAndCount(f.reg, "kubelet_credential_provider_plugin_errors_total"); err != nil || n != 1 {
		t.Errorf("error series %d, %v", n, err)
	}
	if n, err := testutil.GatherAndCount(f.reg, "kubelet_credential_provider_plugin_duration"); err != nil || n != 5 {
		t.Errorf("duration series %d, %v", n, err)
	}

	// Again: first answers from its cache (Registry key, 1m), last is not
	// cached (0s), the failed ones run again.
	if results, _ := f.providers.Lookup(ctx, "b.r.io/other", Pod{}); len(results) != 1 || results[0].Provider != "first" {
		t.Errorf("results %+v", results)
	}
	if n := len(f.requests(t)); n != 5+4 {
		t.Errorf("%d executions, want 9 (b.r.io: a registry of its own; last does not match)", n)
	}
	if results, _ := f.providers.Lookup(ctx, "a.r.io/img2", Pod{}); len(results) != 2 {
		t.Errorf("results %+v", results)
	}
	if n := len(f.requests(t)); n != 9+4 {
		t.Errorf("%d executions, want 13 (first from its cache)", n)
	}
	f.clock.Step(time.Minute + time.Second)
	f.providers.Lookup(ctx, "a.r.io/img2", Pod{})
	if n := len(f.requests(t)); n != 13+5 {
		t.Errorf("%d executions, want 18 (first's entry expired)", n)
	}
}

func TestLookupTimeout(t *testing.T) {
	f := newExecFixture(t, map[string]string{"hang": scriptPlugin("exec sleep 60")}, configHead+provider("hang", "*.r.io", ""), nil)
	f.providers.providers[0].plugin.(*execPlugin).timeout = 100 * time.Millisecond
	start := time.Now()
	results, errs := f.providers.Lookup(quiet(t), "a.r.io/img", Pod{})
	if len(results) != 0 || len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("results %v, errors %v", results, errs)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("lookup took %v", d)
	}
	if n, _ := testutil.GatherAndCount(f.reg, "kubelet_credential_provider_plugin_errors_total"); n != 1 {
		t.Errorf("error series %d", n)
	}
}

// tokenGetter answers for the service account sa in ns.
type tokenGetter struct {
	annotations map[string]string
	requests    []*authenticationv1.TokenRequest
}

func (g *tokenGetter) ServiceAccount(_ context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "sa-uid", Annotations: g.annotations}}, nil
}

func (g *tokenGetter) ServiceAccountToken(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	g.requests = append(g.requests, tr)
	return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "token-of-" + namespace + "-" + name}}, nil
}

func TestLookupServiceAccountToken(t *testing.T) {
	tokenAttrs := func(require bool, required string) string {
		s := `  tokenAttributes:
    serviceAccountTokenAudience: registry-aud
    cacheType: ServiceAccount
    requireServiceAccount: ` + map[bool]string{true: "true", false: "false"}[require] + `
    optionalServiceAccountAnnotationKeys: [r.io/opt]
`
		if required != "" {
			s += "    requiredServiceAccountAnnotationKeys: [" + required + "]\n"
		}
		return s
	}
	plugins := map[string]string{"sa": scriptPlugin(answer(okResponse)), "nosa": scriptPlugin(answer(okResponse))}
	config := configHead + provider("sa", "*.r.io", tokenAttrs(true, "r.io/id")) + provider("nosa", "*.r.io", tokenAttrs(false, ""))

	t.Run("annotated", func(t *testing.T) {
		tokens := &tokenGetter{annotations: map[string]string{"r.io/id": "42", "r.io/opt": "o", "r.io/x": "no"}}
		f := newExecFixture(t, plugins, config, tokens)
		results, errs := f.providers.Lookup(quiet(t), "a.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid", ServiceAccountName: "sa"})
		if len(results) != 2 || len(errs) != 0 {
			t.Fatalf("results %+v, errors %v", results, errs)
		}
		reqs := f.requests(t)
		if len(reqs) != 2 {
			t.Fatalf("%d requests", len(reqs))
		}
		if reqs[0].ServiceAccountToken != "token-of-ns-sa" || !reflect.DeepEqual(reqs[0].ServiceAccountAnnotations, map[string]string{"r.io/id": "42", "r.io/opt": "o"}) {
			t.Errorf("sa request %+v", reqs[0])
		}
		if reqs[1].ServiceAccountToken != "token-of-ns-sa" || !reflect.DeepEqual(reqs[1].ServiceAccountAnnotations, map[string]string{"r.io/opt": "o"}) {
			t.Errorf("nosa request %+v", reqs[1])
		}
		if tr := tokens.requests[0]; tr.UID != "sa-uid" || tr.Spec.Audiences[0] != "registry-aud" || tr.Spec.BoundObjectRef.UID != "uid" {
			t.Errorf("token request %+v", tr)
		}
		// The ServiceAccount cache type: another pod of the service account
		// is answered from the cache (a token is still requested).
		f.providers.Lookup(quiet(t), "a.r.io/img", Pod{Namespace: "ns", Name: "p2", UID: "uid2", ServiceAccountName: "sa"})
		if n := len(f.requests(t)); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
	})

	t.Run("required annotation missing, no service account", func(t *testing.T) {
		f := newExecFixture(t, plugins, config, &tokenGetter{})
		// sa: skipped (required annotation missing), without an error.
		results, errs := f.providers.Lookup(quiet(t), "a.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid", ServiceAccountName: "sa"})
		if len(results) != 1 || results[0].Provider != "nosa" || len(errs) != 0 {
			t.Errorf("results %+v, errors %v", results, errs)
		}
		// No service account: sa skipped (required), nosa run without token.
		results, errs = f.providers.Lookup(quiet(t), "b.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid"})
		if len(results) != 1 || results[0].Provider != "nosa" || len(errs) != 0 {
			t.Errorf("results %+v, errors %v", results, errs)
		}
		reqs := f.requests(t)
		if len(reqs) != 2 || reqs[1].ServiceAccountToken != "" || reqs[1].ServiceAccountAnnotations != nil {
			t.Errorf("requests %+v", reqs)
		}
	})

	t.Run("standalone", func(t *testing.T) {
		f := newExecFixture(t, plugins, config, nil)
		results, errs := f.providers.Lookup(quiet(t), "a.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid", ServiceAccountName: "sa"})
		if len(results) != 0 || len(errs) != 2 || !strings.Contains(errs[0].Error(), "cannot get ServiceAccounts when kubelet is in standalone mode") {
			t.Errorf("results %+v, errors %v", results, errs)
		}
		// Static pods (no service account) still get nosa's answer.
		if results, _ := f.providers.Lookup(quiet(t), "a.r.io/img", Pod{Namespace: "ns", Name: "p", UID: "uid"}); len(results) != 1 {
			t.Errorf("results %+v", results)
		}
	})
}

func TestMetrics(t *testing.T) {
	f := newExecFixture(t, map[string]string{"ok": scriptPlugin(answer(okResponse))}, configHead+provider("ok", "*.r.io", ""), nil)
	m := f.providers.providers[0].plugin.(*execPlugin).metrics
	m.errors.WithLabelValues("test-plugin").Inc()
	m.duration.WithLabelValues("test-plugin").Observe(0.3)
	want := `
# HELP kubelet_credential_provider_plugin_errors_total [ALPHA] Number of errors from credential provider plugin
# TYPE kubelet_credential_provider_plugin_errors_total counter
kubelet_credential_provider_plugin_errors_total{plugin_name="test-plugin"} 1
# HELP kubelet_credential_provider_plugin_duration [ALPHA] Duration of execution in seconds for credential provider plugin
# TYPE kubelet_credential_provider_plugin_duration histogram
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.005"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.01"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.025"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.05"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.1"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.25"} 0
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="0.5"} 1
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="1"} 1
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="2.5"} 1
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="5"} 1
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="10"} 1
kubelet_credential_provider_plugin_duration_bucket{plugin_name="test-plugin",le="+Inf"} 1
kubelet_credential_provider_plugin_duration_sum{plugin_name="test-plugin"} 0.3
kubelet_credential_provider_plugin_duration_count{plugin_name="test-plugin"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "kubelet_credential_provider_plugin_errors_total", "kubelet_credential_provider_plugin_duration"); err != nil {
		t.Error(err)
	}
	_, hash, err := readCredentialProviderConfig(f.config)
	if err != nil {
		t.Fatal(err)
	}
	want = `
# HELP kubelet_credential_provider_config_info [ALPHA] Information about the last applied credential provider configuration with hash as label
# TYPE kubelet_credential_provider_config_info gauge
kubelet_credential_provider_config_info{hash="` + hash + `"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "kubelet_credential_provider_config_info"); err != nil {
		t.Error(err)
	}
}
