package volumes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/apiclient"
)

// Getter gives volumes the API objects they project.
type Getter interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// Token returns a service account token bound to the pod.
	Token(ctx context.Context, pod *v1.Pod, serviceAccount, audience string, expirationSeconds int64) (string, error)
	// ClusterTrustBundle returns the named ClusterTrustBundle
	// (certificates.k8s.io/v1).
	ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	// ClusterTrustBundles returns the ClusterTrustBundles of signerName
	// whose labels selector matches (none for labels.Nothing()). The
	// result is shared: callers must not modify it.
	ClusterTrustBundles(ctx context.Context, signerName string, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error)
}

// APIGetter reads ConfigMaps, Secrets and ClusterTrustBundles with a TTL
// cache shared by every pod (one GET, or LIST for the bundles of a signer
// and label selector, per TTL, however many pods use it), and requests
// bound service account tokens through TokenRequest, renewing them at 80% of
// their lifetime or after 24 h, as upstream.
type APIGetter struct {
	client apiclient.Interface
	clock  clock.Clock
	ttl    time.Duration

	mu      sync.Mutex
	objects map[string]cached
	tokens  map[string]token
}

type cached struct {
	obj     any
	fetched time.Time
}

type token struct {
	value   string
	renewAt time.Time
}

// APIGetterConfig configures an APIGetter.
type APIGetterConfig struct {
	// Client reads ConfigMaps, Secrets and ClusterTrustBundles and
	// requests tokens.
	Client apiclient.Interface
	// Clock ages the cached objects and tokens (the real clock when nil).
	Clock clock.Clock
	// TTL is how long a ConfigMap, Secret or ClusterTrustBundle (or list
	// of them) is served from the cache before it is read again.
	TTL time.Duration
}

// NewAPIGetter returns an APIGetter for cfg. It fails when cfg has no
// Client.
func NewAPIGetter(cfg APIGetterConfig) (*APIGetter, error) {
	if cfg.Client == nil {
		return nil, errors.New("volumes: APIGetterConfig.Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &APIGetter{client: cfg.Client, clock: cfg.Clock, ttl: cfg.TTL, objects: map[string]cached{}, tokens: map[string]token{}}, nil
}

// get returns the cached object while it is younger than the TTL, else
// fetches it. As upstream's cache-based manager: an error is never served
// from the cache (a missing object is looked up again on the next call, so
// a pod waiting for it starts as soon as it exists), and when the API server
// cannot be reached the last object fetched is served (pods keep syncing
// through an outage).
func (g *APIGetter) get(key string, fetch func() (any, error)) (any, error) {
	g.mu.Lock()
	c, ok := g.objects[key]
	g.mu.Unlock()
	if ok && g.clock.Since(c.fetched) < g.ttl {
		return c.obj, nil
	}
	obj, err := fetch()
	switch {
	case err == nil:
		g.mu.Lock()
		g.objects[key] = cached{obj: obj, fetched: g.clock.Now()}
		g.mu.Unlock()
		return obj, nil
	case apierrors.IsNotFound(err):
		g.mu.Lock()
		delete(g.objects, key)
		g.mu.Unlock()
		return nil, err
	case ok:
		return c.obj, nil
	}
	return nil, err
}

// ConfigMap implements Getter.
func (g *APIGetter) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := g.get("configmap/"+namespace+"/"+name, func() (any, error) {
		return g.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// Secret implements Getter.
func (g *APIGetter) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := g.get("secret/"+namespace+"/"+name, func() (any, error) {
		return g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// ClusterTrustBundle implements Getter. As upstream's lister, a missing
// bundle is NotFound for the resource "clustertrustbundle".
func (g *APIGetter) ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	obj, err := g.get("clustertrustbundle/"+name, func() (any, error) {
		return g.client.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
	})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundle"), name)
	}
	if err != nil {
		return nil, err
	}
	return obj.(*certificatesv1.ClusterTrustBundle), nil
}

// ClusterTrustBundles implements Getter: one LIST per signer and selector
// (the API server selects by labels and by spec.signerName, both checked
// again here, as the informer upstream filters by signer). A selector that
// matches nothing (a nil labelSelector) lists nothing.
func (g *APIGetter) ClusterTrustBundles(ctx context.Context, signerName string, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	if _, selectable := selector.Requirements(); !selectable {
		return nil, nil
	}
	sel := selector.String()
	obj, err := g.get("clustertrustbundles/"+signerName+"\x00"+sel, func() (any, error) {
		list, err := g.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{
			LabelSelector: sel,
			FieldSelector: fields.OneTermEqualSelector("spec.signerName", signerName).String(),
		})
		if err != nil {
			return nil, err
		}
		return matchingBundles(list.Items, signerName, selector), nil
	})
	if err != nil {
		return nil, err
	}
	return obj.([]certificatesv1.ClusterTrustBundle), nil
}

// matchingBundles is the bundles of signerName whose labels selector
// matches.
func matchingBundles(items []certificatesv1.ClusterTrustBundle, signerName string, selector labels.Selector) []certificatesv1.ClusterTrustBundle {
	out := []certificatesv1.ClusterTrustBundle{}
	for _, b := range items {
		if b.Spec.SignerName == signerName && selector.Matches(labels.Set(b.Labels)) {
			out = append(out, b)
		}
	}
	return out
}

// Token implements Getter.
func (g *APIGetter) Token(ctx context.Context, pod *v1.Pod, sa, audience string, expirationSeconds int64) (string, error) {
	key := fmt.Sprintf("%s/%s/%s/%d", pod.UID, sa, audience, expirationSeconds)
	g.mu.Lock()
	t, ok := g.tokens[key]
	g.mu.Unlock()
	now := g.clock.Now()
	if ok && now.Before(t.renewAt) {
		return t.value, nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	resp, err := g.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	// A pod's first token can be refused for a few milliseconds after its
	// binding: the API server's node authorizer (Forbidden) and the
	// NodeRestriction admission's pod cache (NotFound: 'pod "x" not found')
	// learn of the pod from their own watches, after this node's watch
	// delivered it; under a burst of creates that lag reaches hundreds of
	// milliseconds. Retry that quickly rather than fail the pod's sync (which
	// would cost a status write with the error and a back-off).
	for delay := firstTokenRetry; !ok && refusedForNow(err) && delay <= maxTokenRetry; delay *= 2 {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-g.clock.After(delay):
		}
		resp, err = g.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("request a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	issued := now
	life := resp.Status.ExpirationTimestamp.Sub(issued)
	renew := issued.Add(time.Duration(float64(life) * 0.8))
	if max := issued.Add(24 * time.Hour); renew.After(max) {
		renew = max
	}
	g.mu.Lock()
	g.tokens[key] = token{value: resp.Status.Token, renewAt: renew}
	g.mu.Unlock()
	return resp.Status.Token, nil
}

// firstTokenRetry and maxTokenRetry bound the quick retries of a pod's
// first token request refused as Forbidden or NotFound (20, 40, ... 640 ms:
// 1.26 s in all, then the pod's sync fails and is retried as any other).
const (
	firstTokenRetry = 20 * time.Millisecond
	maxTokenRetry   = 640 * time.Millisecond
)

// refusedForNow tells whether a first token request's error is one the API
// server's caches give a pod they have not seen yet.
func refusedForNow(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err)
}

// Forget drops the tokens of a pod that is gone.
func (g *APIGetter) Forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.tokens {
		if len(k) > len(uid) && k[:len(uid)] == string(uid) && k[len(uid)] == '/' {
			delete(g.tokens, k)
		}
	}
}
