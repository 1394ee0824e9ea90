package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The kubelet API's authentication and authorization, with upstream's
// semantics: a client certificate signed by authentication.x509.clientCAFile,
// else a bearer token checked with a TokenReview (authentication.webhook),
// else anonymous when enabled; then a SubjectAccessReview for nodes/<sub>
// (authorization.mode Webhook). Both reviews are cached for the configured
// TTLs and retried on transient errors. Written here rather than taken from
// k8s.io/apiserver's delegating factories: those link the API server's
// authentication configuration (CEL, egress selection), a third of nodelet's
// binary, for two API calls.

// webhookBackoff is the retry of TokenReview and SubjectAccessReview calls,
// the API server library's default for authentication webhooks.
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// userInfo is who made a request.
type userInfo struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// attributes is one authorization check: verb on nodes/<Subresource> of
// the node Name.
type attributes struct {
	Verb, Subresource, Name, Path string
}

// authenticator finds who made a request: ok false when no credential
// fits (401), an error when a credential is invalid (401 too).
type authenticator interface {
	authenticate(r *http.Request) (u *userInfo, ok bool, err error)
}

// authorizer decides one check.
type authorizer interface {
	authorize(ctx context.Context, u *userInfo, a attributes) (bool, error)
}

type authorizerFunc func(ctx context.Context, u *userInfo, a attributes) (bool, error)

func (f authorizerFunc) authorize(ctx context.Context, u *userInfo, a attributes) (bool, error) {
	return f(ctx, u, a)
}

// auth authenticates and authorizes requests to the kubelet API.
type auth struct {
	nodeName string
	authn    authenticator
	authz    authorizer
	ca       *caBundle // reloaded when the file changes
}

// newAuth builds the authenticator and authorizer from the configuration.
// client may be nil (standalone): then webhook token authentication is off
// and webhook authorization refuses everything, which newAuth reports.
func newAuth(nodeName string, client apiclient.Interface, authn kubeletv1beta1.KubeletAuthentication, authz kubeletv1beta1.KubeletAuthorization) (*auth, []string, error) {
	a := &auth{nodeName: nodeName}
	var warnings []string
	u := &unionAuth{}
	if authn.X509.ClientCAFile != "" {
		ca, err := newCABundle(authn.X509.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		a.ca = ca
		u.x509 = ca
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if client == nil {
			warnings = append(warnings, "authentication.webhook.enabled needs an API server: bearer tokens are not accepted in standalone mode")
		} else {
			u.tokens = &tokenReviewer{client: client, ttl: authn.Webhook.CacheTTL.Duration, cache: cache.NewLRUExpireCache(4096)}
		}
	}
	u.anonymous = authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled
	if u.x509 == nil && u.tokens == nil && !u.anonymous {
		warnings = append(warnings, "no authentication method (x509.clientCAFile, webhook, anonymous) is usable: every request is refused")
	}
	a.authn = u
	switch authz.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
		a.authz = authorizerFunc(func(context.Context, *userInfo, attributes) (bool, error) { return true, nil })
	case kubeletv1beta1.KubeletAuthorizationModeWebhook:
		if client == nil {
			warnings = append(warnings, "authorization.mode Webhook needs an API server: every request is forbidden in standalone mode (set authorization.mode: AlwaysAllow)")
			a.authz = authorizerFunc(func(context.Context, *userInfo, attributes) (bool, error) { return false, nil })
			break
		}
		a.authz = &accessReviewer{
			client:   client,
			allowTTL: authz.Webhook.CacheAuthorizedTTL.Duration,
			denyTTL:  authz.Webhook.CacheUnauthorizedTTL.Duration,
			cache:    cache.NewLRUExpireCache(4096),
		}
	default:
		return nil, nil, fmt.Errorf("authorization.mode %q is not supported (AlwaysAllow, Webhook)", authz.Mode)
	}
	return a, warnings, nil
}

// run keeps the client CA bundle current until ctx is done.
func (a *auth) run(ctx context.Context) {
	if a.ca != nil {
		go a.ca.run(ctx, 10*time.Second)
	}
}

// unionAuth tries the client certificate, then the bearer token, then
// anonymous. As upstream, a presented credential that fails is a 401 even
// when anonymous access is on, and authenticated users get the
// system:authenticated group.
type unionAuth struct {
	x509      *caBundle
	tokens    *tokenReviewer
	anonymous bool
}

func (u *unionAuth) authenticate(r *http.Request) (*userInfo, bool, error) {
	var errs []error
	if u.x509 != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		user, err := u.x509.verify(r.TLS.PeerCertificates)
		switch {
		case err != nil:
			errs = append(errs, err)
		case user != nil:
			return authenticated(user), true, nil
		}
	}
	if token, ok := bearerToken(r); ok && u.tokens != nil {
		user, ok, err := u.tokens.review(r.Context(), token)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok:
			return authenticated(user), true, nil
		default:
			errs = append(errs, errors.New("invalid bearer token"))
		}
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	if u.anonymous {
		return &userInfo{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, true, nil
	}
	return nil, false, nil
}

func authenticated(u *userInfo) *userInfo {
	for _, g := range u.Groups {
		if g == "system:authenticated" {
			return u
		}
	}
	c := *u
	c.Groups = append(append([]string(nil), u.Groups...), "system:authenticated")
	return &c
}

// bearerToken reads "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// caBundle is the client CA file, reloaded when it changes.
type caBundle struct {
	path string
	mu   sync.RWMutex
	pool *x509.CertPool
	seen string // size and mtime of the loaded file
}

func newCABundle(path string) (*caBundle, error) {
	b := &caBundle{path: path}
	if err := b.load(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *caBundle) load() error {
	st, err := os.Stat(b.path)
	if err != nil {
		return err
	}
	stamp := fmt.Sprint(st.Size(), st.ModTime().UnixNano())
	b.mu.RLock()
	same := stamp == b.seen
	b.mu.RUnlock()
	if same {
		return nil
	}
	data, err := os.ReadFile(b.path)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("%s holds no PEM certificate", b.path)
	}
	b.mu.Lock()
	b.pool, b.seen = pool, stamp
	b.mu.Unlock()
	return nil
}

func (b *caBundle) run(ctx context.Context, every time.Duration) {
	wait.Until(func() {
		if err := b.load(); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot reload the client CA bundle; keeping the previous one", "path", b.path)
		}
	}, every, ctx.Done())
}

// verify checks a client certificate chain: the user is the leaf's common
// name, the groups its organizations.
func (b *caBundle) verify(chain []*x509.Certificate) (*userInfo, error) {
	b.mu.RLock()
	pool := b.pool
	b.mu.RUnlock()
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("verifying certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, nil // as upstream: no user, the next method decides
	}
	return &userInfo{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}, nil
}

// retriable: transient failures of a review call (not a 4xx answer other
// than 429, not the caller going away).
func retriable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code == http.StatusTooManyRequests || code >= 500
	}
	return true
}

// tokenReviewer checks bearer tokens with TokenReviews, caching answers
// (positive and negative) for ttl.
type tokenReviewer struct {
	client apiclient.Interface
	ttl    time.Duration
	cache  *cache.LRUExpireCache
}

type tokenAnswer struct {
	user *userInfo
	ok   bool
}

func (t *tokenReviewer) review(ctx context.Context, token string) (*userInfo, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := t.cache.Get(key); ok {
		a := v.(tokenAnswer)
		return a.user, a.ok, nil
	}
	var res *authnv1.TokenReview
	err := retry.OnError(webhookBackoff, retriable, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		res, err = t.client.AuthenticationV1().TokenReviews().Create(rctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	a := tokenAnswer{ok: res.Status.Authenticated}
	if a.ok {
		u := res.Status.User
		a.user = &userInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			a.user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				a.user.Extra[k] = v
			}
		}
	}
	if t.ttl > 0 {
		t.cache.Add(key, a, t.ttl)
	}
	return a.user, a.ok, nil
}

// accessReviewer asks SubjectAccessReviews, caching allowed answers for
// allowTTL and denied ones for denyTTL.
type accessReviewer struct {
	client            apiclient.Interface
	allowTTL, denyTTL time.Duration
	cache             *cache.LRUExpireCache
}

func (s *accessReviewer) authorize(ctx context.Context, u *userInfo, a attributes) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Name,
		},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	key := reviewKey(sar.Spec)
	if v, ok := s.cache.Get(key); ok {
		return v.(bool), nil
	}
	var res *authzv1.SubjectAccessReview
	err := retry.OnError(webhookBackoff, retriable, func() error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		res, err = s.client.AuthorizationV1().SubjectAccessReviews().Create(rctx, sar, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	if ttl := map[bool]time.Duration{true: s.allowTTL, false: s.denyTTL}[allowed]; ttl > 0 {
		s.cache.Add(key, allowed, ttl)
	}
	return allowed, nil
}

// reviewKey identifies a decision: the review's whole spec, JSON-encoded
// (as upstream's webhook authorizer), so no two identities share a key.
func reviewKey(spec authzv1.SubjectAccessReviewSpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		return "" // never: plain strings and slices
	}
	return string(b)
}

// subresource maps a request path to the nodes subresource upstream checks,
// and whether the fine-grained check falls back to nodes/proxy.
func subresource(path string) (string, bool) {
	switch {
	case isSubpath(path, "/stats"):
		return "stats", false
	case isSubpath(path, "/metrics"):
		return "metrics", false
	case isSubpath(path, "/logs"):
		return "log", false
	case isSubpath(path, "/checkpoint"):
		return "checkpoint", false
	case isSubpath(path, "/configz"):
		return "configz", true
	case isSubpath(path, "/statusz"):
		return "statusz", false
	case isSubpath(path, "/flagz"):
		return "configz", false
	case isSubpath(path, "/healthz"):
		return "healthz", true
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods/"):
		return "pods", true
	}
	return "proxy", false
}

func isSubpath(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/")
}

// verb maps an HTTP method to the API verb upstream authorizes (others,
// HEAD included, get none, as upstream).
func verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// attributes are the authorization checks for a request, any of which
// allows it: nodes/<subresource> of this node, then nodes/proxy for the
// paths that upstream's fine-grained authorization also accepts it for.
func (a *auth) attributes(r *http.Request) []attributes {
	sub, fallback := subresource(r.URL.Path)
	rec := func(sub string) attributes {
		return attributes{Verb: verb(r.Method), Subresource: sub, Name: a.nodeName, Path: r.URL.Path}
	}
	attrs := []attributes{rec(sub)}
	if fallback {
		attrs = append(attrs, rec("proxy"))
	}
	return attrs
}

// filter wraps h with authentication (401 on failure) and authorization
// (403 when refused), as upstream's kubelet auth filter.
func (a *auth) filter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		u, ok, err := a.authn.authenticate(r)
		if err != nil || !ok {
			if err != nil {
				logger.V(2).Info("Unable to authenticate the request", "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		var denied *attributes
		var authzErr error
		for _, attrs := range a.attributes(r) {
			allowed, err := a.authz.authorize(r.Context(), u, attrs)
			if err == nil && allowed {
				h.ServeHTTP(w, r)
				return
			}
			if denied == nil {
				denied, authzErr = &attrs, err
			}
		}
		msg := fmt.Sprintf("user=%s, verb=%s, resource=nodes, subresource=%s", u.Name, denied.Verb, denied.Subresource)
		if authzErr != nil && !errors.Is(authzErr, context.Canceled) {
			logger.Error(authzErr, "Authorization error", "user", u.Name, "path", r.URL.Path)
			http.Error(w, "Authorization error ("+msg+")", http.StatusInternalServerError)
			return
		}
		logger.V(2).Info("Forbidden", "user", u.Name, "verb", denied.Verb, "subresource", denied.Subresource, "path", r.URL.Path)
		http.Error(w, "Forbidden ("+msg+")", http.StatusForbidden)
	})
}
