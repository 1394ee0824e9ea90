package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// webhookBackoff is the retry of TokenReview and SubjectAccessReview calls,
// the API server library's default for authentication webhooks.
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// auth authenticates and authorizes requests to the kubelet API.
type auth struct {
	nodeName string
	authn    authenticator.Request
	authz    authorizer.Authorizer
	// caFile reloads the client CA bundle when it changes on disk.
	caFile *dynamiccertificates.DynamicFileCAContent
}

// newAuth builds the authenticator and authorizer from the configuration.
// client may be nil (standalone): then webhook token authentication is off
// and webhook authorization refuses everything, which newAuth reports.
func newAuth(nodeName string, client kubernetes.Interface, authn kubeletv1beta1.KubeletAuthentication, authz kubeletv1beta1.KubeletAuthorization) (*auth, []string, error) {
	a := &auth{nodeName: nodeName}
	var warnings []string
	cfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled},
		CacheTTL:  authn.Webhook.CacheTTL.Duration,
	}
	if authn.X509.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", authn.X509.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		a.caFile = ca
		cfg.ClientCertificateCAContentProvider = ca
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if client == nil {
			warnings = append(warnings, "authentication.webhook.enabled needs an API server: bearer tokens are not accepted in standalone mode")
		} else {
			cfg.TokenAccessReviewClient = client.AuthenticationV1()
			cfg.TokenAccessReviewTimeout = 10 * time.Second
			bo := webhookBackoff
			cfg.WebhookRetryBackoff = &bo
		}
	}
	var err error
	if cfg.ClientCertificateCAContentProvider == nil && cfg.TokenAccessReviewClient == nil && !cfg.Anonymous.Enabled {
		// Nothing can authenticate: every request gets 401.
		warnings = append(warnings, "no authentication method (x509.clientCAFile, webhook, anonymous) is usable: every request is refused")
		a.authn = authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil })
	} else if a.authn, _, err = cfg.New(); err != nil {
		return nil, nil, err
	}
	switch authz.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
		a.authz = authorizerfactory.NewAlwaysAllowAuthorizer()
	case kubeletv1beta1.KubeletAuthorizationModeWebhook:
		if client == nil {
			warnings = append(warnings, "authorization.mode Webhook needs an API server: every request is forbidden in standalone mode (set authorization.mode: AlwaysAllow)")
			a.authz = authorizerfactory.NewAlwaysDenyAuthorizer()
			break
		}
		bo := webhookBackoff
		zc := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: client.AuthorizationV1(),
			AllowCacheTTL:             authz.Webhook.CacheAuthorizedTTL.Duration,
			DenyCacheTTL:              authz.Webhook.CacheUnauthorizedTTL.Duration,
			WebhookRetryBackoff:       &bo,
		}
		if a.authz, err = zc.New(); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("authorization.mode %q is not supported (AlwaysAllow, Webhook)", authz.Mode)
	}
	return a, warnings, nil
}

// run keeps the client CA bundle current until ctx is done.
func (a *auth) run(ctx context.Context) {
	if a.caFile != nil {
		go a.caFile.Run(ctx, 1)
	}
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
	case isSubpath(path, "/healthz"):
		return "healthz", true
	case isSubpath(path, "/pods"):
		return "pods", true
	}
	return "proxy", false
}

func isSubpath(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, strings.TrimSuffix(prefix, "/")+"/")
}

// verb maps an HTTP method to the API verb upstream authorizes.
func verb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
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
func (a *auth) attributes(u user.Info, r *http.Request) []authorizer.Attributes {
	sub, fallback := subresource(r.URL.Path)
	rec := func(sub string) authorizer.Attributes {
		return authorizer.AttributesRecord{
			User: u, Verb: verb(r.Method), APIVersion: "v1", Resource: "nodes", Subresource: sub,
			Name: a.nodeName, ResourceRequest: true, Path: r.URL.Path,
		}
	}
	attrs := []authorizer.Attributes{rec(sub)}
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
		resp, ok, err := a.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				logger.V(2).Info("Unable to authenticate the request", "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		var denied authorizer.Attributes
		var authzErr error
		for _, attrs := range a.attributes(resp.User, r) {
			decision, _, err := a.authz.Authorize(r.Context(), attrs)
			if err == nil && decision == authorizer.DecisionAllow {
				h.ServeHTTP(w, r)
				return
			}
			if denied == nil {
				denied, authzErr = attrs, err
			}
		}
		msg := fmt.Sprintf("user=%s, verb=%s, resource=%s, subresource=%s", denied.GetUser().GetName(), denied.GetVerb(), denied.GetResource(), denied.GetSubresource())
		if authzErr != nil && !errors.Is(authzErr, context.Canceled) {
			logger.Error(authzErr, "Authorization error", "user", denied.GetUser().GetName(), "path", r.URL.Path)
			http.Error(w, "Authorization error ("+msg+")", http.StatusInternalServerError)
			return
		}
		logger.V(2).Info("Forbidden", "user", denied.GetUser().GetName(), "verb", denied.GetVerb(), "subresource", denied.GetSubresource(), "path", r.URL.Path)
		http.Error(w, "Forbidden ("+msg+")", http.StatusForbidden)
	})
}
