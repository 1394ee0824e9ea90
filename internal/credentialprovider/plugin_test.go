package credentialprovider

// Most cases are upstream's (pkg/credentialprovider/plugin/plugin_test.go),
// adapted: provide returns its error instead of logging it, and the
// singleflight test runs in a synctest bubble instead of sleeping.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	configv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	credentialproviderv1alpha1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1alpha1"
	credentialproviderv1beta1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1beta1"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

type fakeExecPlugin struct {
	cacheKeyType  credentialproviderapi.PluginCacheKeyType
	cacheDuration time.Duration

	auth map[string]credentialproviderapi.AuthConfig
}

func (f *fakeExecPlugin) ExecPlugin(ctx context.Context, image, serviceAccountToken string, serviceAccountAnnotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	return &credentialproviderapi.CredentialProviderResponse{
		CacheKeyType:  f.cacheKeyType,
		CacheDuration: &metav1.Duration{Duration: f.cacheDuration},
		Auth:          f.auth,
	}, nil
}

// blockingFakeExecPlugin counts its calls and answers once release is
// closed, so that concurrent calls can join one singleflight execution.
type blockingFakeExecPlugin struct {
	fakeExecPlugin
	release chan struct{}
	mu      sync.Mutex
	count   int
}

func (f *blockingFakeExecPlugin) ExecPlugin(ctx context.Context, image, serviceAccountToken string, serviceAccountAnnotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	f.mu.Lock()
	f.count++
	f.mu.Unlock()
	<-f.release
	return f.fakeExecPlugin.ExecPlugin(ctx, image, serviceAccountToken, serviceAccountAnnotations)
}

// fakeTokens is a TokenGetter of functions.
type fakeTokens struct {
	sa    func(namespace, name string) (*v1.ServiceAccount, error)
	token func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

func (f *fakeTokens) ServiceAccount(_ context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return f.sa(namespace, name)
}

func (f *fakeTokens) ServiceAccountToken(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return f.token(namespace, name, tr)
}

func TestSingleflightProvide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tclock := clock.RealClock{} // fake time in the bubble
		execPlugin := &blockingFakeExecPlugin{
			fakeExecPlugin: fakeExecPlugin{
				cacheKeyType: credentialproviderapi.RegistryPluginCacheKeyType,
				auth: map[string]credentialproviderapi.AuthConfig{
					"test.registry.io": {Username: "user", Password: "password"},
				},
			},
		}
		p := &pluginProvider{
			plugin:         execPlugin,
			clock:          tclock,
			lastCachePurge: tclock.Now(),
			matchImages:    []string{"test.registry.io"},
			cache:          newCache(tclock),
		}
		pod := Pod{Name: "pod-name", Namespace: "pod-namespace", UID: "pod-uid", ServiceAccountName: "service-account-name"}
		const concurrentCalls = 5
		run := func() int {
			execPlugin.count = 0
			execPlugin.release = make(chan struct{})
			var wg sync.WaitGroup
			for range concurrentCalls {
				wg.Go(func() {
					if _, _, _, err := p.provide(t.Context(), "test.registry.io", pod); err != nil {
						t.Error(err)
					}
				})
			}
			synctest.Wait() // all in the flight, or waiting for it
			close(execPlugin.release)
			wg.Wait()
			return execPlugin.count
		}

		if n := run(); n != 1 {
			t.Errorf("expected ExecPlugin to be called once, but was called %d times", n)
		}

		p.serviceAccountProvider = &serviceAccountProvider{
			audience: "audience",
			tokens: &fakeTokens{
				sa: func(namespace, name string) (*v1.ServiceAccount, error) {
					return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: "service-account-uid"}}, nil
				},
				token: func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
					return &authenticationv1.TokenRequest{}, nil
				},
			},
		}
		if n := run(); n != 1 {
			t.Errorf("expected ExecPlugin to be called once with serviceAccountProvider, but was called %d times", n)
		}

		// A different token per call (same service account, different pods).
		p.serviceAccountProvider.tokens.(*fakeTokens).token = func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: rand.String(10)}}, nil
		}
		if n := run(); n != concurrentCalls {
			t.Errorf("expected ExecPlugin to be called %d times with different serviceaccount tokens, but was called %d times", concurrentCalls, n)
		}
	})
}

// A caller whose context ends stops waiting; the execution goes on for the
// others.
func TestProvideCallerContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		execPlugin := &blockingFakeExecPlugin{
			fakeExecPlugin: fakeExecPlugin{
				cacheKeyType:  credentialproviderapi.RegistryPluginCacheKeyType,
				cacheDuration: time.Minute,
				auth:          map[string]credentialproviderapi.AuthConfig{"test.registry.io": {Username: "u", Password: "p"}},
			},
			release: make(chan struct{}),
		}
		p := &pluginProvider{plugin: execPlugin, clock: clock.RealClock{}, matchImages: []string{"test.registry.io"}, cache: newCache(clock.RealClock{})}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, _, err := p.provide(ctx, "test.registry.io/a", Pod{})
			errc <- err
		}()
		var other map[string]Auth
		done := make(chan struct{})
		go func() {
			other, _, _, _ = p.provide(t.Context(), "test.registry.io/a", Pod{})
			close(done)
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("canceled caller: %v, want context.Canceled", err)
		}
		close(execPlugin.release)
		<-done
		if other["test.registry.io"].Username != "u" || execPlugin.count != 1 {
			t.Errorf("other caller got %v after %d executions", other, execPlugin.count)
		}
	})
}

func TestProvide(t *testing.T) {
	tclock := clock.RealClock{}
	saWith := func(annotations map[string]string) func(_, _ string) (*v1.ServiceAccount, error) {
		return func(_, _ string) (*v1.ServiceAccount, error) {
			return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa-name", Namespace: "ns", UID: "sa-uid", Annotations: annotations}}, nil
		}
	}
	tokenIs := func(token string) func(_, _ string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		return func(_, _ string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: token}}, nil
		}
	}
	registryPlugin := func(key string) *fakeExecPlugin {
		return &fakeExecPlugin{cacheKeyType: credentialproviderapi.RegistryPluginCacheKeyType,
			auth: map[string]credentialproviderapi.AuthConfig{key: {Username: "user", Password: "password"}}}
	}
	testcases := []struct {
		name        string
		provider    *pluginProvider
		pod         Pod
		image       string
		want        map[string]Auth
		wantOK      bool
		wantErr     string
		usedPlugins bool
	}{
		{
			name:     "exact image match, with Registry cache key",
			provider: &pluginProvider{matchImages: []string{"test.registry.io"}, plugin: registryPlugin("test.registry.io")},
			image:    "test.registry.io/foo/bar",
			want:     map[string]Auth{"test.registry.io": {Username: "user", Password: "password"}},
			wantOK:   true,
		},
		{
			name: "exact image match, with Image cache key",
			provider: &pluginProvider{matchImages: []string{"test.registry.io/foo/bar"}, plugin: &fakeExecPlugin{
				cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
				auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io/foo/bar": {Username: "user", Password: "password"}},
			}},
			image:  "test.registry.io/foo/bar",
			want:   map[string]Auth{"test.registry.io/foo/bar": {Username: "user", Password: "password"}},
			wantOK: true,
		},
		{
			name: "exact image match, with Global cache key",
			provider: &pluginProvider{matchImages: []string{"test.registry.io"}, plugin: &fakeExecPlugin{
				cacheKeyType: credentialproviderapi.GlobalPluginCacheKeyType,
				auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io": {Username: "user", Password: "password"}},
			}},
			image:  "test.registry.io",
			want:   map[string]Auth{"test.registry.io": {Username: "user", Password: "password"}},
			wantOK: true,
		},
		{
			name:     "wild card image match, with Registry cache key",
			provider: &pluginProvider{matchImages: []string{"*.registry.io:8080"}, plugin: registryPlugin("*.registry.io:8080")},
			image:    "test.registry.io:8080/foo",
			want:     map[string]Auth{"*.registry.io:8080": {Username: "user", Password: "password"}},
			wantOK:   true,
		},
		{
			name: "wild card image match, with Image cache key",
			provider: &pluginProvider{matchImages: []string{"*.*.registry.io"}, plugin: &fakeExecPlugin{
				cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
				auth:         map[string]credentialproviderapi.AuthConfig{"*.*.registry.io": {Username: "user", Password: "password"}},
			}},
			image:  "foo.bar.registry.io/foo/bar",
			want:   map[string]Auth{"*.*.registry.io": {Username: "user", Password: "password"}},
			wantOK: true,
		},
		{
			name:     "image not matched",
			provider: &pluginProvider{matchImages: []string{"*.registry.io"}, plugin: registryPlugin("*.registry.io")},
			image:    "registry.io/foo",
		},
		{
			name: "invalid cacheKeyType",
			provider: &pluginProvider{matchImages: []string{"test.registry.io"}, plugin: &fakeExecPlugin{
				cacheKeyType: "Pod",
				auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io": {Username: "user", Password: "password"}},
			}},
			image:   "test.registry.io/foo",
			wantErr: "credential provider plugin did not return a valid cacheKeyType: Pod",
		},
		{
			name: "[service account mode] sa name required but empty",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				serviceAccountProvider: &serviceAccountProvider{requireServiceAccount: true}},
			pod:   Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid"},
			image: "test.registry.io/foo/bar",
		},
		{
			name: "[service account mode] sa name not required and empty: no token",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"}, plugin: registryPlugin("test.registry.io"),
				serviceAccountProvider: &serviceAccountProvider{requireServiceAccount: false}},
			pod:    Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid"},
			image:  "test.registry.io/foo/bar",
			want:   map[string]Auth{"test.registry.io": {Username: "user", Password: "password"}},
			wantOK: true,
		},
		{
			name: "[service account mode] sa does not have required annotations",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				serviceAccountProvider: &serviceAccountProvider{
					requireServiceAccount:                true,
					requiredServiceAccountAnnotationKeys: []string{"domain.io/identity-id"},
					tokens:                               &fakeTokens{sa: saWith(map[string]string{})},
				}},
			pod:   Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid", ServiceAccountName: "sa-name"},
			image: "test.registry.io/foo/bar",
		},
		{
			name: "[service account mode] failed to get service account",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				serviceAccountProvider: &serviceAccountProvider{requireServiceAccount: true, tokens: standaloneTokens{}}},
			pod:     Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid", ServiceAccountName: "sa-name"},
			image:   "test.registry.io/foo/bar",
			wantErr: "failed to get service account: cannot get ServiceAccounts when kubelet is in standalone mode",
		},
		{
			name: "[service account mode] failed to get service account token",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				serviceAccountProvider: &serviceAccountProvider{
					requireServiceAccount:                true,
					requiredServiceAccountAnnotationKeys: []string{"domain.io/identity-id"},
					optionalServiceAccountAnnotationKeys: []string{"domain.io/identity-type"},
					tokens: &fakeTokens{
						sa: saWith(map[string]string{"domain.io/identity-id": "id"}),
						token: func(_, _ string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
							return nil, errors.New("failed to get token")
						},
					},
				}},
			pod:     Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid", ServiceAccountName: "sa-name"},
			image:   "test.registry.io/foo/bar",
			wantErr: "failed to get service account token: failed to get token",
		},
		{
			name: "[service account mode] cache type not token but service account echoed back",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				plugin: &fakeExecPlugin{
					cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
					auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io/foo/bar": {Username: "user", Password: "token"}},
				},
				serviceAccountProvider: &serviceAccountProvider{
					requireServiceAccount:                true,
					requiredServiceAccountAnnotationKeys: []string{"domain.io/identity-id"},
					optionalServiceAccountAnnotationKeys: []string{"domain.io/identity-type"},
					tokens:                               &fakeTokens{sa: saWith(map[string]string{"domain.io/identity-id": "id"}), token: tokenIs("token")},
				}},
			pod:     Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid", ServiceAccountName: "sa-name"},
			image:   "test.registry.io/foo/bar",
			wantErr: "credential provider plugin returned the service account token as the password which is not allowed when service account cache type is not set to 'Token'",
		},
		{
			name: "[service account mode] token echoed back with Token cache type",
			provider: &pluginProvider{name: "test-plugin", matchImages: []string{"test.registry.io"},
				plugin: &fakeExecPlugin{
					cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
					auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io/foo/bar": {Username: "user", Password: "token"}},
				},
				serviceAccountProvider: &serviceAccountProvider{
					requireServiceAccount: true,
					cacheType:             configv1.TokenServiceAccountTokenCacheType,
					tokens:                &fakeTokens{sa: saWith(nil), token: tokenIs("token")},
				}},
			pod:    Pod{Name: "pod-name", Namespace: "ns", UID: "pod-uid", ServiceAccountName: "sa-name"},
			image:  "test.registry.io/foo/bar",
			want:   map[string]Auth{"test.registry.io/foo/bar": {Username: "user", Password: "token"}},
			wantOK: true,
		},
		{
			name: "[service account mode] exact image match",
			provider: &pluginProvider{matchImages: []string{"test.registry.io"},
				plugin: &fakeExecPlugin{
					cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
					auth:         map[string]credentialproviderapi.AuthConfig{"test.registry.io/foo/bar": {Username: "user", Password: "password"}},
				},
				serviceAccountProvider: &serviceAccountProvider{
					requireServiceAccount:                true,
					requiredServiceAccountAnnotationKeys: []string{"domain.io/identity-id"},
					optionalServiceAccountAnnotationKeys: []string{"domain.io/identity-type"},
					tokens: &fakeTokens{
						sa:    saWith(map[string]string{"domain.io/identity-id": "id", "domain.io/identity-type": "type"}),
						token: tokenIs("token"),
					},
				}},
			pod:    Pod{Name: "pod-name", Namespace: "ns", ServiceAccountName: "sa-name"},
			image:  "test.registry.io/foo/bar",
			want:   map[string]Auth{"test.registry.io/foo/bar": {Username: "user", Password: "password"}},
			wantOK: true,
		},
	}

	for _, tc := range testcases {
		t.Run(tc.name, func(t *testing.T) {
			tc.provider.clock = tclock
			tc.provider.lastCachePurge = tclock.Now()
			tc.provider.cache = newCache(tclock)
			got, _, ok, err := tc.provider.provide(t.Context(), tc.image, tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("provide = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// recordingTokens records the token requests and service account reads.
type recordingTokens struct {
	mu       sync.Mutex
	requests []*authenticationv1.TokenRequest
	names    []string
}

func (r *recordingTokens) ServiceAccount(_ context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: "sa-uid",
		Annotations: map[string]string{"a.io/req": "r", "a.io/opt": "o", "a.io/other": "x"}}}, nil
}

func (r *recordingTokens) ServiceAccountToken(_ context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, tr)
	r.names = append(r.names, namespace+"/"+name)
	return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "tok-" + string(tr.Spec.BoundObjectRef.UID)}}, nil
}

// recordingExecPlugin records what the plugin was given.
type recordingExecPlugin struct {
	fakeExecPlugin
	tokens      []string
	annotations []map[string]string
}

func (r *recordingExecPlugin) ExecPlugin(ctx context.Context, image, token string, annotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	r.tokens = append(r.tokens, token)
	r.annotations = append(r.annotations, annotations)
	return r.fakeExecPlugin.ExecPlugin(ctx, image, token, annotations)
}

// The token request is upstream's; the plugin gets the token and the
// annotations asked for; the ServiceAccount cache type shares answers
// between the pods of a service account, the Token cache type does not.
func TestProvideServiceAccountRequest(t *testing.T) {
	for _, cacheType := range []configv1.ServiceAccountTokenCacheType{configv1.ServiceAccountServiceAccountTokenCacheType, configv1.TokenServiceAccountTokenCacheType} {
		t.Run(string(cacheType), func(t *testing.T) {
			tokens := &recordingTokens{}
			plugin := &recordingExecPlugin{fakeExecPlugin: fakeExecPlugin{
				cacheKeyType: credentialproviderapi.RegistryPluginCacheKeyType, cacheDuration: time.Hour,
				auth: map[string]credentialproviderapi.AuthConfig{"r.io": {Username: "u", Password: "p"}},
			}}
			fc := testingclock.NewFakeClock(time.Now())
			p := &pluginProvider{name: "p", clock: fc, lastCachePurge: fc.Now(), cache: newCache(fc), matchImages: []string{"r.io"}, plugin: plugin,
				serviceAccountProvider: &serviceAccountProvider{
					audience: "aud", requireServiceAccount: true, tokens: tokens, cacheType: cacheType,
					requiredServiceAccountAnnotationKeys: []string{"a.io/req"},
					optionalServiceAccountAnnotationKeys: []string{"a.io/opt", "a.io/missing"},
				}}
			for _, uid := range []types.UID{"uid-1", "uid-2"} {
				_, sa, ok, err := p.provide(t.Context(), "r.io/img", Pod{Namespace: "ns", Name: "pod-" + string(uid), UID: uid, ServiceAccountName: "sa"})
				if err != nil || !ok {
					t.Fatalf("provide: %v, %v", ok, err)
				}
				// The credentials are the service account's (image pull
				// records keep it), from the cache too.
				if want := (ServiceAccount{UID: "sa-uid", Namespace: "ns", Name: "sa"}); sa == nil || *sa != want {
					t.Errorf("service account %+v, want %+v", sa, want)
				}
			}
			tr := tokens.requests[0]
			want := &authenticationv1.TokenRequest{
				ObjectMeta: metav1.ObjectMeta{UID: "sa-uid"},
				Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"aud"},
					BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "pod-uid-1", UID: "uid-1"}},
			}
			if !reflect.DeepEqual(tr, want) || tokens.names[0] != "ns/sa" {
				t.Errorf("token request for %s: %+v, want %+v", tokens.names[0], tr, want)
			}
			if plugin.tokens[0] != "tok-uid-1" || !reflect.DeepEqual(plugin.annotations[0], map[string]string{"a.io/req": "r", "a.io/opt": "o"}) {
				t.Errorf("plugin got token %q, annotations %v", plugin.tokens[0], plugin.annotations[0])
			}
			wantRuns := 1
			if cacheType == configv1.TokenServiceAccountTokenCacheType {
				wantRuns = 2
			}
			if len(plugin.tokens) != wantRuns {
				t.Errorf("plugin ran %d times, want %d", len(plugin.tokens), wantRuns)
			}
		})
	}
}

// This test calls provide in parallel for different registries and images,
// to detect races on the cache.
func Test_ProvideParallel(t *testing.T) {
	tclock := clock.RealClock{}
	p := &pluginProvider{
		clock:          tclock,
		lastCachePurge: tclock.Now(),
		matchImages:    []string{"test1.registry.io", "test2.registry.io", "test3.registry.io", "test4.registry.io"},
		cache:          newCache(tclock),
		plugin: &fakeExecPlugin{
			cacheDuration: time.Minute,
			cacheKeyType:  credentialproviderapi.RegistryPluginCacheKeyType,
			auth:          map[string]credentialproviderapi.AuthConfig{"test.registry.io": {Username: "user", Password: "password"}},
		},
	}
	want := map[string]Auth{"test.registry.io": {Username: "user", Password: "password"}}
	for _, registry := range []string{"test1.registry.io", "test2.registry.io", "test3.registry.io", "test4.registry.io"} {
		t.Run(registry, func(t *testing.T) {
			t.Parallel()
			var wg sync.WaitGroup
			for range 5 {
				wg.Go(func() {
					image := registry + "/" + rand.String(5)
					got, _, _, err := p.provide(context.Background(), image, Pod{})
					if err != nil || !reflect.DeepEqual(got, want) {
						t.Errorf("unexpected docker config for image %s: %v (%v), expected: %v", image, got, err, want)
					}
				})
			}
			wg.Wait()
		})
	}
}

func Test_getCachedCredentials(t *testing.T) {
	fakeClock := testingclock.NewFakeClock(time.Now())
	p := &pluginProvider{
		clock:          fakeClock,
		lastCachePurge: fakeClock.Now(),
		cache:          newCache(fakeClock),
		plugin:         &fakeExecPlugin{},
	}

	testcases := []struct {
		name             string
		step             time.Duration
		cacheEntry       cacheEntry
		expectedResponse map[string]Auth
		keyLength        int
		getKey           string
	}{
		{
			name:             "It should return not expired credential",
			step:             1 * time.Second,
			keyLength:        1,
			getKey:           "image1",
			expectedResponse: map[string]Auth{"image1": {Username: "user1", Password: "pass1"}},
			cacheEntry: cacheEntry{
				key:         "\x00\x06image1\x00\x00",
				expiresAt:   fakeClock.Now().Add(1 * time.Minute),
				credentials: map[string]Auth{"image1": {Username: "user1", Password: "pass1"}},
			},
		},
		{
			name:      "It should not return expired credential",
			step:      2 * time.Minute,
			getKey:    "image2",
			keyLength: 1,
			cacheEntry: cacheEntry{
				key:         "\x00\x06image2\x00\x00",
				expiresAt:   fakeClock.Now(),
				credentials: map[string]Auth{"image2": {Username: "user2", Password: "pass2"}},
			},
		},
		{
			name:      "It should delete expired credential during purge",
			step:      18 * time.Minute,
			keyLength: 0,
			// The purge, not the get, must drop image3.
			getKey: "random",
			cacheEntry: cacheEntry{
				key:         "\x00\x06image3\x00\x00",
				expiresAt:   fakeClock.Now().Add(2 * time.Minute),
				credentials: map[string]Auth{"image3": {Username: "user3", Password: "pass3"}},
			},
		},
	}

	for _, tc := range testcases {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.cache.Add(&tc.cacheEntry); err != nil {
				t.Fatal(err)
			}
			fakeClock.Step(tc.step)
			res, _, err := p.getCachedCredentials(tc.getKey, "")
			if err != nil {
				t.Errorf("Unexpected error %v", err)
			}
			if !reflect.DeepEqual(res, tc.expectedResponse) {
				t.Errorf("response %v, want %v", res, tc.expectedResponse)
			}
			// ListKeys returns all the keys, expired ones included.
			if n := len(p.cache.ListKeys()); n != tc.keyLength {
				t.Errorf("cache has %d keys, want %d", n, tc.keyLength)
			}
		})
	}
}

func Test_getCachedCredentials_pluginUsingServiceAccount(t *testing.T) {
	fakeClock := testingclock.NewFakeClock(time.Now())
	p := &pluginProvider{
		clock:          fakeClock,
		lastCachePurge: fakeClock.Now(),
		cache:          newCache(fakeClock),
		plugin:         &fakeExecPlugin{},
	}

	serviceAccountCacheKey, err := generateServiceAccountCacheKey(cacheKeyParams{
		namespace:          "namespace",
		serviceAccountName: "serviceAccountName",
		serviceAccountUID:  "service-account-uid",
		saAnnotations:      map[string]string{"prefix.io/annotation-1": "value1", "prefix.io/annotation-2": "value2"},
		podName:            "pod-name",
		podUID:             "pod-uid",
	})
	if err != nil {
		t.Fatal(err)
	}
	cacheKey1, _ := generateCacheKey("image1", serviceAccountCacheKey)
	cacheKey2, _ := generateCacheKey("image2", serviceAccountCacheKey)

	testcases := []struct {
		name             string
		step             time.Duration
		cacheEntry       cacheEntry
		expectedResponse map[string]Auth
		keyLength        int
		getKey           string
	}{
		{
			name:             "It should return not expired credential",
			step:             1 * time.Second,
			keyLength:        1,
			getKey:           "image1",
			expectedResponse: map[string]Auth{"image1": {Username: "user1", Password: "pass1"}},
			cacheEntry: cacheEntry{
				key:         cacheKey1,
				expiresAt:   fakeClock.Now().Add(1 * time.Minute),
				credentials: map[string]Auth{"image1": {Username: "user1", Password: "pass1"}},
			},
		},
		{
			name:      "It should not return expired credential",
			step:      2 * time.Minute,
			getKey:    "image2",
			keyLength: 1,
			cacheEntry: cacheEntry{
				key:         cacheKey2,
				expiresAt:   fakeClock.Now(),
				credentials: map[string]Auth{"image2": {Username: "user2", Password: "pass2"}},
			},
		},
		{
			name:      "It should delete expired credential during purge",
			step:      18 * time.Minute,
			keyLength: 0,
			getKey:    "random",
			cacheEntry: cacheEntry{
				key:         "image3",
				expiresAt:   fakeClock.Now().Add(2 * time.Minute),
				credentials: map[string]Auth{"image3": {Username: "user3", Password: "pass3"}},
			},
		},
	}

	for _, tc := range testcases {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.cache.Add(&tc.cacheEntry); err != nil {
				t.Fatal(err)
			}
			fakeClock.Step(tc.step)
			res, _, err := p.getCachedCredentials(tc.getKey, serviceAccountCacheKey)
			if err != nil {
				t.Errorf("Unexpected error %v", err)
			}
			if !reflect.DeepEqual(res, tc.expectedResponse) {
				t.Errorf("response %v, want %v", res, tc.expectedResponse)
			}
			if n := len(p.cache.ListKeys()); n != tc.keyLength {
				t.Errorf("cache has %d keys, want %d", n, tc.keyLength)
			}
		})
	}
}

func Test_encodeRequest(t *testing.T) {
	testcases := []struct {
		name         string
		apiVersion   schema.GroupVersion
		request      *credentialproviderapi.CredentialProviderRequest
		expectedData []byte
	}{
		{
			name:       "successful with v1alpha1",
			apiVersion: credentialproviderv1alpha1.SchemeGroupVersion,
			request:    &credentialproviderapi.CredentialProviderRequest{Image: "test.registry.io/foobar"},
			expectedData: []byte(`{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","image":"test.registry.io/foobar"}
`),
		},
		{
			name:       "successful with v1beta1",
			apiVersion: credentialproviderv1beta1.SchemeGroupVersion,
			request:    &credentialproviderapi.CredentialProviderRequest{Image: "test.registry.io/foobar"},
			expectedData: []byte(`{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","image":"test.registry.io/foobar"}
`),
		},
		{
			name:       "successful with v1",
			apiVersion: credentialproviderv1.SchemeGroupVersion,
			request:    &credentialproviderapi.CredentialProviderRequest{Image: "test.registry.io/foobar"},
			expectedData: []byte(`{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"test.registry.io/foobar"}
`),
		},
		{
			name:       "successful with v1, with service account token and annotations",
			apiVersion: credentialproviderv1.SchemeGroupVersion,
			request: &credentialproviderapi.CredentialProviderRequest{
				Image:                     "test.registry.io/foobar",
				ServiceAccountToken:       "service-account-token",
				ServiceAccountAnnotations: map[string]string{"domain.io/annotation1": "value1"},
			},
			expectedData: []byte(`{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"test.registry.io/foobar","serviceAccountToken":"service-account-token","serviceAccountAnnotations":{"domain.io/annotation1":"value1"}}
`),
		},
	}

	for _, testcase := range testcases {
		t.Run(testcase.name, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), "application/json")
			if !ok {
				t.Fatal("unsupported media type")
			}
			e := &execPlugin{encoder: codecs.EncoderForVersion(info.Serializer, testcase.apiVersion)}
			data, err := e.encodeRequest(testcase.request)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !bytes.Equal(data, testcase.expectedData) {
				t.Errorf("encoded %s\nwant %s", data, testcase.expectedData)
			}
		})
	}
}

func Test_decodeResponse(t *testing.T) {
	ok := &credentialproviderapi.CredentialProviderResponse{
		CacheKeyType:  credentialproviderapi.RegistryPluginCacheKeyType,
		CacheDuration: &metav1.Duration{Duration: time.Minute},
		Auth:          map[string]credentialproviderapi.AuthConfig{"*.registry.io": {Username: "user", Password: "password"}},
	}
	testcases := []struct {
		name             string
		data             []byte
		expectedResponse *credentialproviderapi.CredentialProviderResponse
		expectedErr      bool
	}{
		{
			name:             "success with v1",
			data:             []byte(`{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.registry.io":{"username":"user","password":"password"}}}`),
			expectedResponse: ok,
		},
		{
			name:             "success with v1beta1",
			data:             []byte(`{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.registry.io":{"username":"user","password":"password"}}}`),
			expectedResponse: ok,
		},
		{
			name:             "success with v1alpha1",
			data:             []byte(`{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.registry.io":{"username":"user","password":"password"}}}`),
			expectedResponse: ok,
		},
		{
			name:        "wrong Kind",
			data:        []byte(`{"kind":"WrongKind","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.registry.io":{"username":"user","password":"password"}}}`),
			expectedErr: true,
		},
		{
			name:        "wrong Group",
			data:        []byte(`{"kind":"CredentialProviderResponse","apiVersion":"foobar.kubelet.k8s.io/v1beta1","cacheKeyType":"Registry","cacheDuration":"1m","auth":{"*.registry.io":{"username":"user","password":"password"}}}`),
			expectedErr: true,
		},
		{
			name:        "unknown field (strict)",
			data:        []byte(`{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","extra":1}`),
			expectedErr: true,
		},
	}

	for _, testcase := range testcases {
		t.Run(testcase.name, func(t *testing.T) {
			e := &execPlugin{}
			decoded, err := e.decodeResponse(testcase.data)
			if (err != nil) != testcase.expectedErr {
				t.Fatalf("error %v, want an error: %v", err, testcase.expectedErr)
			}
			if !reflect.DeepEqual(decoded, testcase.expectedResponse) {
				t.Errorf("decoded %#v, want %#v", decoded, testcase.expectedResponse)
			}
		})
	}
}

func Test_NoCacheResponse(t *testing.T) {
	tclock := clock.RealClock{}
	p := &pluginProvider{
		clock:          tclock,
		lastCachePurge: tclock.Now(),
		matchImages:    []string{"*.registry.io"},
		cache:          newCache(tclock),
		plugin: &fakeExecPlugin{
			cacheKeyType:  credentialproviderapi.GlobalPluginCacheKeyType,
			cacheDuration: 0, // no cache
			auth:          map[string]credentialproviderapi.AuthConfig{"*.registry.io": {Username: "user", Password: "password"}},
		},
	}
	got, _, _, err := p.provide(t.Context(), "test.registry.io/foo/bar", Pod{})
	if want := map[string]Auth{"*.registry.io": {Username: "user", Password: "password"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("provide = %v, %v; want %v", got, err, want)
	}
	if keys := p.cache.ListKeys(); len(keys) != 0 {
		t.Errorf("cache keys %v, want none", keys)
	}
}

// nilDurationPlugin answers without a cacheDuration.
type nilDurationPlugin struct{ fakeExecPlugin }

func (f *nilDurationPlugin) ExecPlugin(ctx context.Context, image, token string, annotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	r, _ := f.fakeExecPlugin.ExecPlugin(ctx, image, token, annotations)
	r.CacheDuration = nil
	return r, nil
}

func TestExpiry(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Now())
	now := fc.Now()
	for _, tc := range []struct {
		name          string
		defaultCache  time.Duration
		cacheDuration *metav1.Duration
		want          time.Time
		wantCache     bool
	}{
		{"response 0: not cached", time.Hour, &metav1.Duration{}, time.Time{}, false},
		{"response duration", time.Hour, &metav1.Duration{Duration: time.Minute}, now.Add(time.Minute), true},
		{"none: default", time.Hour, nil, now.Add(time.Hour), true},
		{"none, default 0: not cached", 0, nil, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pluginProvider{clock: fc, defaultCacheDuration: tc.defaultCache}
			got, cached := p.expiry(tc.cacheDuration)
			if !got.Equal(tc.want) || cached != tc.wantCache {
				t.Errorf("expiry = %v, %v; want %v, %v", got, cached, tc.want, tc.wantCache)
			}
		})
	}

	// The default duration applies to a response without one, and the
	// entry expires after it.
	p := &pluginProvider{clock: fc, lastCachePurge: fc.Now(), cache: newCache(fc), matchImages: []string{"r.io"}, defaultCacheDuration: time.Minute,
		plugin: &nilDurationPlugin{fakeExecPlugin{cacheKeyType: credentialproviderapi.ImagePluginCacheKeyType,
			auth: map[string]credentialproviderapi.AuthConfig{"r.io": {Username: "u"}}}}}
	if _, _, _, err := p.provide(t.Context(), "r.io/a", Pod{}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := p.getCachedCredentials("r.io/a", ""); !found {
		t.Error("not cached for the default duration")
	}
	fc.Step(time.Minute + time.Second)
	if _, found, _ := p.getCachedCredentials("r.io/a", ""); found {
		t.Error("still cached after the default duration")
	}
}

func Test_ExecPluginEnvVars(t *testing.T) {
	testcases := []struct {
		name            string
		systemEnvVars   []string
		envVars         []configv1.ExecEnvVar
		expectedEnvVars []string
	}{
		{
			name:            "positive append system env vars",
			systemEnvVars:   []string{"HOME=/home/foo", "PATH=/usr/bin"},
			envVars:         []configv1.ExecEnvVar{{Name: "SUPER_SECRET_STRONG_ACCESS_KEY", Value: "123456789"}},
			expectedEnvVars: []string{"HOME=/home/foo", "PATH=/usr/bin", "SUPER_SECRET_STRONG_ACCESS_KEY=123456789"},
		},
		{
			name:            "positive no env vars provided in plugin",
			systemEnvVars:   []string{"HOME=/home/foo", "PATH=/usr/bin"},
			expectedEnvVars: []string{"HOME=/home/foo", "PATH=/usr/bin"},
		},
		{
			name:            "positive no system env vars but env vars are provided in plugin",
			envVars:         []configv1.ExecEnvVar{{Name: "SUPER_SECRET_STRONG_ACCESS_KEY", Value: "123456789"}},
			expectedEnvVars: []string{"SUPER_SECRET_STRONG_ACCESS_KEY=123456789"},
		},
		{
			name:            "positive no system or plugin provided env vars",
			expectedEnvVars: nil,
		},
		{
			name:            "positive plugin provided vars takes priority",
			systemEnvVars:   []string{"HOME=/home/foo", "PATH=/usr/bin", "SUPER_SECRET_STRONG_ACCESS_KEY=1111"},
			envVars:         []configv1.ExecEnvVar{{Name: "SUPER_SECRET_STRONG_ACCESS_KEY", Value: "123456789"}},
			expectedEnvVars: []string{"HOME=/home/foo", "PATH=/usr/bin", "SUPER_SECRET_STRONG_ACCESS_KEY=1111", "SUPER_SECRET_STRONG_ACCESS_KEY=123456789"},
		},
	}
	for _, tc := range testcases {
		t.Run(tc.name, func(t *testing.T) {
			var configVars []string
			for _, v := range tc.envVars {
				configVars = append(configVars, fmt.Sprintf("%s=%s", v.Name, v.Value))
			}
			if merged := mergeEnvVars(tc.systemEnvVars, configVars); !reflect.DeepEqual(merged, tc.expectedEnvVars) {
				t.Errorf("merged %v, want %v", merged, tc.expectedEnvVars)
			}
		})
	}
}

func TestGenerateServiceAccountCacheKey_Deterministic(t *testing.T) {
	namespace1, name1, uid1 := "default", "service-account1", types.UID("633a81d0-0f58-4a43-9e84-113145201b72")
	annotations1 := map[string]string{"domain.io/identity-id": "1234567890", "domain.io/role": "admin"}
	namespace2, name2, uid2 := "kube-system", "service-account2", types.UID("1408a4e6-e40b-4bbf-9019-4d86bfea73ae")
	annotations2 := map[string]string{"domain.io/identity-id": "0987654321", "domain.io/role": "viewer"}

	type tcase struct {
		ns, name    string
		uid         types.UID
		annotations map[string]string
	}
	var testCases []tcase
	for _, uid := range []types.UID{uid1, uid2} {
		for _, ns := range []string{namespace1, namespace2} {
			for _, name := range []string{name1, name2} {
				for _, a := range []map[string]string{annotations1, annotations2} {
					testCases = append(testCases, tcase{ns, name, uid, a})
				}
			}
		}
	}
	for _, tc := range testCases {
		for _, tc2 := range testCases {
			k1, err1 := generateServiceAccountCacheKey(cacheKeyParams{namespace: tc.ns, serviceAccountName: tc.name, serviceAccountUID: tc.uid, saAnnotations: tc.annotations})
			k2, err2 := generateServiceAccountCacheKey(cacheKeyParams{namespace: tc2.ns, serviceAccountName: tc2.name, serviceAccountUID: tc2.uid, saAnnotations: tc2.annotations})
			if err1 != nil || err2 != nil {
				t.Fatalf("err1=%v, err2=%v", err1, err2)
			}
			same := reflect.DeepEqual(tc, tc2)
			if (k1 == k2) != same {
				t.Errorf("%+v vs %+v: keys equal %v, want %v", tc, tc2, k1 == k2, same)
			}
			c1, _ := generateCacheKey("registry.io/image", k1)
			c2, _ := generateCacheKey("registry.io/image", k2)
			if (c1 == c2) != same {
				t.Errorf("%+v vs %+v: cache keys equal %v, want %v", tc, tc2, c1 == c2, same)
			}
		}
	}
}

func TestGenerateServiceAccountCacheKey(t *testing.T) {
	tests := []struct {
		name          string
		saAnnotations map[string]string
		cacheType     configv1.ServiceAccountTokenCacheType
		want          string
	}{
		{
			name: "no annotations",
			want: "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x00",
		},
		{
			name:          "single annotation",
			saAnnotations: map[string]string{"domain.io/annotation-1": "value1"},
			want:          "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x01\x00\x16domain.io/annotation-1\x00\x06value1",
		},
		{
			name:          "multiple annotations",
			saAnnotations: map[string]string{"domain.io/annotation-1": "value1", "domain.io/annotation-2": "value2"},
			want:          "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x02\x00\x16domain.io/annotation-1\x00\x06value1\x00\x16domain.io/annotation-2\x00\x06value2",
		},
		{
			name:          "annotations with different order should be sorted",
			saAnnotations: map[string]string{"domain.io/annotation-2": "value2", "domain.io/annotation-1": "value1"},
			want:          "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x02\x00\x16domain.io/annotation-1\x00\x06value1\x00\x16domain.io/annotation-2\x00\x06value2",
		},
		{
			name:          "token hash included",
			saAnnotations: map[string]string{"domain.io/annotation-2": "value2", "domain.io/annotation-1": "value1"},
			cacheType:     configv1.TokenServiceAccountTokenCacheType,
			want:          "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x02\x00\x16domain.io/annotation-1\x00\x06value1\x00\x16domain.io/annotation-2\x00\x06value2\x00\x05token\x00Gsha256:f7a41acb9633520e657fe58dedcd9e6a784e2d97e4c646492b45c61e28595c70",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := generateServiceAccountCacheKey(cacheKeyParams{
				namespace:          "namespace",
				serviceAccountName: "service-account",
				serviceAccountUID:  "service-account-uid",
				saAnnotations:      tc.saAnnotations,
				podName:            "pod-name",
				podUID:             "pod-uid",
				saTokenHash:        "sha256:f7a41acb9633520e657fe58dedcd9e6a784e2d97e4c646492b45c61e28595c70",
				cacheType:          tc.cacheType,
			})
			if err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Errorf("expected %q, got %q", tc.want, got)
			}
		})
	}
}

func TestGenerateCacheKey(t *testing.T) {
	tests := []struct {
		name, baseKey, serviceAccountCacheKey, want string
	}{
		{
			name:    "empty service account cache key",
			baseKey: "registry.io/image",
			want:    "\x00\x11registry.io/image\x00\x00",
		},
		{
			name:                   "combined key",
			baseKey:                "registry.io/image",
			serviceAccountCacheKey: "\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x02\x00\x16domain.io/annotation-1\x00\x06value1\x00\x16domain.io/annotation-2\x00\x06value2",
			want:                   "\x00\x11registry.io/image\x00u\x00\tnamespace\x00\x0fservice-account\x00\x13service-account-uid\x00\x00\x00\x02\x00\x16domain.io/annotation-1\x00\x06value1\x00\x16domain.io/annotation-2\x00\x06value2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := generateCacheKey(tc.baseKey, tc.serviceAccountCacheKey)
			if err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Errorf("expected %q, got %q", tc.want, got)
			}
		})
	}
	if _, err := generateCacheKey(strings.Repeat("x", 0x10000), ""); err == nil {
		t.Error("a base key longer than 65535 bytes gave no error")
	}
}

func TestRequiredAnnotationNotFoundErr(t *testing.T) {
	if !isRequiredAnnotationNotFoundError(fmt.Errorf("wrapped: %w", requiredAnnotationNotFoundError("something"))) {
		t.Error("required annotation not found error not recognized")
	}
	if isRequiredAnnotationNotFoundError(errors.New("some other error")) {
		t.Error("other error recognized")
	}
}

func Test_CacheKeyGeneration(t *testing.T) {
	testImage := "test.registry.io/foo/bar"
	saParams := func(cacheType configv1.ServiceAccountTokenCacheType) string {
		key, err := generateServiceAccountCacheKey(cacheKeyParams{
			namespace:          "namespace",
			serviceAccountName: "service-account-name",
			serviceAccountUID:  "service-account-uid",
			saAnnotations:      map[string]string{"prefix.io/annotation-1": "value1", "prefix.io/annotation-2": "value2"},
			podName:            "pod-name",
			podUID:             "pod-uid",
			saTokenHash:        getHashIfNotEmpty("token"),
			cacheType:          cacheType,
		})
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	testCases := []struct {
		name                    string
		pluginCacheKeyType      credentialproviderapi.PluginCacheKeyType
		serviceAccountCacheType configv1.ServiceAccountTokenCacheType // "": no SA mode
		baseKey                 string
	}{
		{"image-no-sa", credentialproviderapi.ImagePluginCacheKeyType, "", testImage},
		{"image-sa-serviceaccount", credentialproviderapi.ImagePluginCacheKeyType, configv1.ServiceAccountServiceAccountTokenCacheType, testImage},
		{"image-sa-token", credentialproviderapi.ImagePluginCacheKeyType, configv1.TokenServiceAccountTokenCacheType, testImage},
		{"registry-no-sa", credentialproviderapi.RegistryPluginCacheKeyType, "", "test.registry.io"},
		{"registry-sa-serviceaccount", credentialproviderapi.RegistryPluginCacheKeyType, configv1.ServiceAccountServiceAccountTokenCacheType, "test.registry.io"},
		{"registry-sa-token", credentialproviderapi.RegistryPluginCacheKeyType, configv1.TokenServiceAccountTokenCacheType, "test.registry.io"},
		{"global-no-sa", credentialproviderapi.GlobalPluginCacheKeyType, "", globalCacheKey},
		{"global-sa-serviceaccount", credentialproviderapi.GlobalPluginCacheKeyType, configv1.ServiceAccountServiceAccountTokenCacheType, globalCacheKey},
		{"global-sa-token", credentialproviderapi.GlobalPluginCacheKeyType, configv1.TokenServiceAccountTokenCacheType, globalCacheKey},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tclock := clock.RealClock{}
			p := &pluginProvider{
				clock:          tclock,
				lastCachePurge: tclock.Now(),
				matchImages:    []string{"*.registry.io"},
				cache:          newCache(tclock),
				plugin: &fakeExecPlugin{
					cacheKeyType:  tc.pluginCacheKeyType,
					cacheDuration: time.Hour,
					auth:          map[string]credentialproviderapi.AuthConfig{"*.registry.io": {Username: "user", Password: "password"}},
				},
			}
			saKey := ""
			if tc.serviceAccountCacheType != "" {
				p.serviceAccountProvider = &serviceAccountProvider{
					audience:                             "audience",
					requiredServiceAccountAnnotationKeys: []string{"prefix.io/annotation-1", "prefix.io/annotation-2"},
					cacheType:                            tc.serviceAccountCacheType,
					tokens: &fakeTokens{
						sa: func(namespace, name string) (*v1.ServiceAccount, error) {
							return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "service-account-uid",
								Annotations: map[string]string{"prefix.io/annotation-1": "value1", "prefix.io/annotation-2": "value2"}}}, nil
						},
						token: func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
							return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "token"}}, nil
						},
					},
				}
				saKey = saParams(tc.serviceAccountCacheType)
			}
			pod := Pod{Name: "pod-name", Namespace: "namespace", UID: "pod-uid", ServiceAccountName: "service-account-name"}
			want := map[string]Auth{"*.registry.io": {Username: "user", Password: "password"}}

			got, _, _, err := p.provide(t.Context(), testImage, pod)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("provide = %v, %v", got, err)
			}
			wantKey, _ := generateCacheKey(tc.baseKey, saKey)
			if keys := p.cache.ListKeys(); len(keys) != 1 || keys[0] != wantKey {
				t.Errorf("cache keys %q, want [%q]", keys, wantKey)
			}

			// A cache hit does not run the plugin.
			p.plugin = nil
			if got, _, _, err := p.provide(t.Context(), testImage, pod); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("cached provide = %v, %v", got, err)
			}
		})
	}
}

func TestURLsMatch(t *testing.T) {
	tests := []struct {
		globURL       string
		targetURL     string
		matchExpected bool
	}{
		// match when there is no path component
		{"*.kubernetes.io", "prefix.kubernetes.io", true},
		{"prefix.*.io", "prefix.kubernetes.io", true},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true},
		// match with path components
		{"*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true},
		// match with path components and ports
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true},
		{"prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true},
		// no match when number of parts mismatch
		{"*.kubernetes.io", "kubernetes.io", false},
		{"*.*.kubernetes.io", "prefix.kubernetes.io", false},
		{"*.*.kubernetes.io", "kubernetes.io", false},
		{"*kubernetes.io", "a.kubernetes.io", false},
		// match when number of parts match
		{"*kubernetes.io", "kubernetes.io", true},
		{"*.*.*.kubernetes.io", "a.b.c.kubernetes.io", true},
		// no match when some parts mismatch
		{"kubernetes.io", "kubernetes.com", false},
		{"k*.io", "quay.io", false},
		// no match when ports mismatch
		{"*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false},
		{"prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false},
	}
	for _, test := range tests {
		matched, _ := urlsMatchStr(test.globURL, test.targetURL)
		if matched != test.matchExpected {
			t.Errorf("Expected match result of %s and %s to be %t, but was %t", test.globURL, test.targetURL, test.matchExpected, matched)
		}
	}
}

func TestParseRegistry(t *testing.T) {
	for image, want := range map[string]string{
		"registry.io/foo/bar":   "registry.io",
		"registry.io:5000/foo":  "registry.io:5000",
		"registry.io":           "registry.io",
		"docker.io/library/foo": "docker.io",
	} {
		if got := parseRegistry(image); got != want {
			t.Errorf("parseRegistry(%q) = %q, want %q", image, got, want)
		}
	}
}
