package images

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/credentialprovider"
)

func dockerConfigJSON(ns, name string, auths map[string]string) *v1.Secret {
	var parts []string
	for reg, up := range auths {
		parts = append(parts, fmt.Sprintf("%q: {\"auth\": %q}", reg, base64.StdEncoding.EncodeToString([]byte(up))))
	}
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {` + strings.Join(parts, ",") + `}}`)},
	}
}

func TestKeyringLookup(t *testing.T) {
	// One secret per key, user named after the key (":" is "_" in users).
	keys := []string{
		"registry.example", "registry.example/team", "registry.example/team/app", "registry.example:5000",
		"*.glob.example", "https://index.docker.io/v1/", "127.0.0.1:35001", "http://plain.example/v2/",
	}
	var secrets []*v1.Secret
	for _, k := range keys {
		secrets = append(secrets, dockerConfigJSON("ns", "s-"+k, map[string]string{k: strings.ReplaceAll(k, ":", "_") + ":pw"}))
	}
	kr, err := keyringFromSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		image string
		want  []string // users, in order
	}{
		{"registry.example/team/app:1", []string{"registry.example/team/app", "registry.example/team", "registry.example"}},
		{"registry.example/team/other:1", []string{"registry.example/team", "registry.example"}},
		{"registry.example/x@sha256:abcd", []string{"registry.example"}},
		{"registry.example:5000/x:1", []string{"registry.example:5000"}},
		{"registry.example:6000/x:1", nil},
		{"a.glob.example/x", []string{"*.glob.example"}},
		{"a.b.glob.example/x", nil},
		{"busybox", []string{"https://index.docker.io/v1/"}},
		{"docker.io/library/busybox:1.36", []string{"https://index.docker.io/v1/"}},
		{"someone/app:2", []string{"https://index.docker.io/v1/"}},
		{"127.0.0.1:35001/private/busybox:1.36", []string{"127.0.0.1:35001"}},
		{"127.0.0.1:35000/private/busybox:1.36", nil},
		{"plain.example/x", []string{"http://plain.example/v2/"}},
		{"other.example/x", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, c := range kr.lookup(repository(tt.image)) {
			got = append(got, strings.ReplaceAll(c.Auth.Username, "_", ":"))
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s (%s): credentials of %v, want %v", tt.image, repository(tt.image), got, tt.want)
		}
	}
}

func TestKeyringFromSecrets(t *testing.T) {
	tests := []struct {
		name    string
		secret  *v1.Secret
		want    string // user:password of the credential for registry.example/x
		wantErr bool
	}{
		{"dockerconfigjson with auth", dockerConfigJSON("ns", "a", map[string]string{"registry.example": "u:p:with:colons"}), "u:p:with:colons", false},
		{"dockerconfigjson with username and password", &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
			v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"username":"u","password":"p"}}}`)}}, "u:p", false},
		{"dockercfg, unpadded auth", &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{
			v1.DockerConfigKey: []byte(`{"https://registry.example":{"auth":"` + base64.RawStdEncoding.EncodeToString([]byte("u:pw")) + `"}}`)}}, "u:pw", false},
		{"opaque secrets are ignored", &v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{
			v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"username":"u","password":"p"}}}`)}}, "", false},
		{"wrong key for the type is ignored", &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{
			v1.DockerConfigJsonKey: []byte(`{}`)}}, "", false},
		{"bad JSON", &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{`)}}, "", true},
		{"bad auth field", &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
			v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}}`)}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kr, err := keyringFromSecrets([]*v1.Secret{tt.secret})
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got := ""
			if cs := kr.lookup(repository("registry.example/x:1")); len(cs) > 0 {
				got = cs[0].Auth.Username + ":" + cs[0].Auth.Password
			}
			if got != tt.want {
				t.Errorf("credential %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                              "docker.io/library/busybox",
		"busybox:1.36":                         "docker.io/library/busybox",
		"someone/app:1":                        "docker.io/someone/app",
		"index.docker.io/library/busybox":      "docker.io/library/busybox",
		"localhost/app:1":                      "localhost/app",
		"localhost:5000/app":                   "localhost:5000/app",
		"127.0.0.1:35001/private/busybox:1.36": "127.0.0.1:35001/private/busybox",
		"registry.example/a/b@sha256:0123":     "registry.example/a/b",
		"registry.example/a/b:1@sha256:0123":   "registry.example/a/b",
	} {
		if got := repository(in); got != want {
			t.Errorf("repository(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeSecrets is a SecretGetter over a map; a missing secret is NotFound.
type fakeSecrets map[string]*v1.Secret

func (f fakeSecrets) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := f[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// authImages is an image service whose registry 127.0.0.1:35001 wants
// user:secret; every other image pulls anonymously.
type authImages struct {
	fakeImages
}

func (a *authImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error) {
	a.mu.Lock()
	a.auths = append(a.auths, auth)
	a.mu.Unlock()
	if strings.HasPrefix(spec.Image, "127.0.0.1:35001/") && (auth == nil || auth.Username != "user" || auth.Password != "secret") {
		a.mu.Lock()
		a.calls++
		a.mu.Unlock()
		return "", errors.New("failed to resolve reference: 401 Unauthorized")
	}
	return a.fakeImages.PullImage(ctx, spec, auth, sb)
}

func TestEnsureImageWithPullSecrets(t *testing.T) {
	const private = "127.0.0.1:35001/private/busybox:1.36"
	right := dockerConfigJSON("ns", "right", map[string]string{"127.0.0.1:35001": "user:secret"})
	wrong := dockerConfigJSON("ns", "wrong", map[string]string{"127.0.0.1:35001": "user:nope"})
	elsewhere := dockerConfigJSON("ns", "elsewhere", map[string]string{"registry.example": "user:secret"})
	secrets := fakeSecrets{"ns/right": right, "ns/wrong": wrong, "ns/elsewhere": elsewhere}
	tests := []struct {
		name       string
		image      string
		secrets    []string
		getter     bool
		wantUsers  []string // the credentials of each PullImage, "" anonymous
		wantReason string
		wantEvent  string // a pod event that must be recorded
	}{
		{"no secret: anonymous, refused", private, nil, true, []string{""}, ReasonErrImagePull, ""},
		{"the right secret", private, []string{"right"}, true, []string{"user:secret"}, "", ""},
		{"a wrong password", private, []string{"wrong"}, true, []string{"user:nope"}, ReasonErrImagePull, ""},
		{"wrong then right: each tried in turn", private, []string{"wrong", "right"}, true, []string{"user:nope", "user:secret"}, "", ""},
		{"a secret for another registry: anonymous", private, []string{"elsewhere"}, true, []string{""}, ReasonErrImagePull, ""},
		{"a missing secret: a warning, the pull goes on", private, []string{"gone", "right"}, true, []string{"user:secret"}, "", ""},
		{"only a missing secret", private, []string{"gone"}, true, []string{""}, ReasonErrImagePull,
			"Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed."},
		{"no API server: secrets cannot be read", private, []string{"right"}, false, []string{""}, ReasonErrImagePull, "FailedToRetrieveImagePullSecret"},
		{"a public image with secrets for another registry", "docker.io/library/busybox:1.36", []string{"right"}, true, []string{""}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &authImages{fakeImages: fakeImages{present: map[string]bool{}}}
			rec := record.NewFakeRecorder(100)
			cfg := Config{Service: svc, Recorder: rec, Clock: testingclock.NewFakeClock(time.Now())}
			if tt.getter {
				cfg.Secrets = secrets
			}
			p := newPuller(t, cfg)
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
			for _, s := range tt.secrets {
				pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
			}
			c := &v1.Container{Name: "c", Image: tt.image, ImagePullPolicy: v1.PullIfNotPresent}
			_, err := p.EnsureImage(context.Background(), pod, c, nil)
			var ie *Error
			switch {
			case tt.wantReason == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wantReason != "" && (!errors.As(err, &ie) || ie.Reason != tt.wantReason):
				t.Fatalf("error %v, want reason %s", err, tt.wantReason)
			}
			var users []string
			for _, a := range svc.auths {
				u := ""
				if a != nil {
					u = a.Username + ":" + a.Password
				}
				users = append(users, u)
			}
			if !reflect.DeepEqual(users, tt.wantUsers) {
				t.Errorf("pulls with %q, want %q", users, tt.wantUsers)
			}
			close(rec.Events)
			found := tt.wantEvent == ""
			for e := range rec.Events {
				if tt.wantEvent != "" && strings.Contains(e, tt.wantEvent) {
					found = true
				}
				if tt.wantReason == "" && strings.Contains(e, "FailedToRetrieveImagePullSecret") {
					t.Errorf("pull-secret warning although the pull worked: %s", e)
				}
			}
			if !found {
				t.Errorf("no event %q", tt.wantEvent)
			}
		})
	}
}

// fakeImages is an image service whose pulls can be held at a gate, and
// that counts the pulls in flight.
type fakeImages struct {
	mu          sync.Mutex
	present     map[string]bool
	gate        chan struct{} // pulls wait for it to close, when set
	started     chan string   // every pull's image, when set
	calls       int
	inflight    int
	maxInflight int
	auths       []*runtimeapi.AuthConfig
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	return nil, nil
}

func (f *fakeImages) ImageStatus(_ context.Context, spec *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.present[spec.Image] {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "id-" + spec.Image, Size: 42}}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (f *fakeImages) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	f.calls++
	f.inflight++
	f.maxInflight = max(f.maxInflight, f.inflight)
	gate, started := f.gate, f.started
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if started != nil {
		started <- spec.Image
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	f.mu.Lock()
	f.present[spec.Image] = true
	f.mu.Unlock()
	return "id-" + spec.Image, nil
}

func (f *fakeImages) RemoveImage(context.Context, *runtimeapi.ImageSpec) error { return nil }

func (f *fakeImages) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *fakeImages) Close(context.Context) error { return nil }

// fakeProviders answers every lookup with the same results and errors,
// recording the images and pods asked for.
type fakeProviders struct {
	results []credentialprovider.Result
	errs    []error
	asked   []string
}

func (f *fakeProviders) Lookup(_ context.Context, image string, pod credentialprovider.Pod) ([]credentialprovider.Result, []error) {
	f.asked = append(f.asked, image+" "+pod.Namespace+"/"+pod.Name+" sa="+pod.ServiceAccountName)
	return f.results, f.errs
}

// The credential provider plugins' credentials come after the pull
// secrets', matched against the image as the secrets' are; a failed
// provider is a Warning event naming it, and the pull goes on.
func TestEnsureImageWithCredentialProviders(t *testing.T) {
	const private = "127.0.0.1:35001/private/busybox:1.36"
	wrong := dockerConfigJSON("ns", "wrong", map[string]string{"127.0.0.1:35001": "user:nope"})
	provided := []credentialprovider.Result{
		{Provider: "elsewhere", Auths: map[string]credentialprovider.Auth{"*.example.com": {Username: "x", Password: "y"}}},
		{Provider: "local", Auths: map[string]credentialprovider.Auth{"127.0.0.1:35001/private": {Username: "user", Password: "secret"}}},
	}
	failed := &credentialprovider.ProviderError{Provider: "broken", Image: "127.0.0.1:35001/private/busybox", Err: errors.New("exit status 1")}
	tests := []struct {
		name      string
		secrets   []string
		results   []credentialprovider.Result
		errs      []error
		wantUsers []string
		wantErr   bool
		wantEvent string
	}{
		{"the provider's credential", nil, provided, nil, []string{"user:secret"}, false, ""},
		{"secrets first", []string{"wrong"}, provided, nil, []string{"user:nope", "user:secret"}, false, ""},
		{"nothing matches: anonymous", nil, provided[:1], nil, []string{""}, true, ""},
		{"a failed provider: named in an event, the others still used", nil, provided, []error{failed}, []string{"user:secret"}, false,
			"Warning FailedCredentialProvider credential provider broken failed for image 127.0.0.1:35001/private/busybox: exit status 1"},
		{"only a failed provider: the pull fails naming it", nil, nil, []error{failed}, []string{""}, true, "credential provider broken failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &authImages{fakeImages: fakeImages{present: map[string]bool{}}}
			rec := record.NewFakeRecorder(100)
			fp := &fakeProviders{results: tt.results, errs: tt.errs}
			p := newPuller(t, Config{Service: svc, Recorder: rec, Clock: testingclock.NewFakeClock(time.Now()),
				Secrets: fakeSecrets{"ns/wrong": wrong}, Providers: fp})
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: v1.PodSpec{ServiceAccountName: "sa"}}
			for _, s := range tt.secrets {
				pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
			}
			_, err := p.EnsureImage(context.Background(), pod, &v1.Container{Name: "c", Image: private, ImagePullPolicy: v1.PullAlways}, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && len(tt.errs) > 0 && !strings.Contains(err.Error(), "credential provider broken failed") {
				t.Errorf("the pull's error does not name the failed provider: %v", err)
			}
			if want := []string{"127.0.0.1:35001/private/busybox ns/p sa=sa"}; !reflect.DeepEqual(fp.asked, want) {
				t.Errorf("providers asked %q, want %q", fp.asked, want)
			}
			var users []string
			for _, a := range svc.auths {
				u := ""
				if a != nil {
					u = a.Username + ":" + a.Password
				}
				users = append(users, u)
			}
			if !tt.wantErr || len(users) > 0 {
				if !reflect.DeepEqual(users[:len(tt.wantUsers)], tt.wantUsers) {
					t.Errorf("pulls with %q, want %q first", users, tt.wantUsers)
				}
			}
			close(rec.Events)
			found := tt.wantEvent == ""
			for e := range rec.Events {
				found = found || strings.Contains(e, tt.wantEvent)
			}
			if !found {
				t.Errorf("no event %q", tt.wantEvent)
			}
		})
	}
}
