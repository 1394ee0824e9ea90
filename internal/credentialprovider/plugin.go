package credentialprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/utils/clock"
)

const (
	// globalCacheKey is the cache key of credentials that are not specific
	// to a registry or an image; the angle brackets cannot be in either.
	globalCacheKey = "<global>"
	// cachePurgeInterval is how often expired entries that are never read
	// again are dropped from a provider's cache.
	cachePurgeInterval = 15 * time.Minute
	// execTimeout is upstream's catch-all timeout of a plugin's execution.
	execTimeout = time.Minute
	// execWaitDelay bounds the wait for a killed plugin's output pipes (a
	// child it left may hold them open); not in upstream, which can block
	// there until such a child exits.
	execWaitDelay = 5 * time.Second
)

// plugin gets a provider's response for an image; the exec implementation
// runs its binary, tests use fakes.
type plugin interface {
	ExecPlugin(ctx context.Context, image, serviceAccountToken string, serviceAccountAnnotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error)
}

// pluginProvider is one configured provider: its matchImages, its cache of
// answers, and its plugin.
type pluginProvider struct {
	name  string
	clock clock.Clock

	mu sync.Mutex // guards lastCachePurge
	// lastCachePurge is the last time expired entries were dropped.
	lastCachePurge time.Time

	group singleflight.Group

	// matchImages are the images the provider is run for.
	matchImages []string

	// cache holds *cacheEntry, expiring at the plugin's cache duration.
	cache cache.Store
	// defaultCacheDuration is used when the plugin's response has none.
	defaultCacheDuration time.Duration

	plugin plugin

	// serviceAccountProvider is set for providers with tokenAttributes.
	serviceAccountProvider *serviceAccountProvider
}

// serviceAccountProvider gets the service account data and tokens of a
// provider with tokenAttributes.
type serviceAccountProvider struct {
	audience                             string
	requireServiceAccount                bool
	tokens                               TokenGetter
	requiredServiceAccountAnnotationKeys []string
	optionalServiceAccountAnnotationKeys []string
	cacheType                            configv1.ServiceAccountTokenCacheType
}

func newServiceAccountProvider(provider configv1.CredentialProvider, tokens TokenGetter) *serviceAccountProvider {
	// The KubeletServiceAccountTokenForCredentialProviders gate is on.
	if provider.TokenAttributes == nil || len(provider.TokenAttributes.ServiceAccountTokenAudience) == 0 {
		return nil
	}
	return &serviceAccountProvider{
		audience:                             provider.TokenAttributes.ServiceAccountTokenAudience,
		requireServiceAccount:                *provider.TokenAttributes.RequireServiceAccount,
		tokens:                               tokens,
		requiredServiceAccountAnnotationKeys: provider.TokenAttributes.RequiredServiceAccountAnnotationKeys,
		optionalServiceAccountAnnotationKeys: provider.TokenAttributes.OptionalServiceAccountAnnotationKeys,
		cacheType:                            provider.TokenAttributes.CacheType,
	}
}

// requiredAnnotationNotFoundError is a required annotation missing from
// the service account: the plugin is not run (workloads opt in with it).
type requiredAnnotationNotFoundError string

func (e requiredAnnotationNotFoundError) Error() string {
	return fmt.Sprintf("required annotation %s not found", string(e))
}

func isRequiredAnnotationNotFoundError(err error) bool {
	var target requiredAnnotationNotFoundError
	return errors.As(err, &target)
}

// getServiceAccountData returns the service account's UID and the
// annotations the plugin asks for: every required key (missing: a
// requiredAnnotationNotFoundError) and the optional keys present.
func (s *serviceAccountProvider) getServiceAccountData(ctx context.Context, namespace, name string) (types.UID, map[string]string, error) {
	sa, err := s.tokens.ServiceAccount(ctx, namespace, name)
	if err != nil {
		return "", nil, err
	}
	saAnnotations := make(map[string]string, len(s.requiredServiceAccountAnnotationKeys)+len(s.optionalServiceAccountAnnotationKeys))
	for _, k := range s.requiredServiceAccountAnnotationKeys {
		val, ok := sa.Annotations[k]
		if !ok {
			return "", nil, requiredAnnotationNotFoundError(k)
		}
		saAnnotations[k] = val
	}
	for _, k := range s.optionalServiceAccountAnnotationKeys {
		if val, ok := sa.Annotations[k]; ok {
			saAnnotations[k] = val
		}
	}
	return sa.UID, saAnnotations, nil
}

// getServiceAccountToken requests a token for the audience bound to the
// pod, with the service account's UID as a precondition.
func (s *serviceAccountProvider) getServiceAccountToken(ctx context.Context, podNamespace, podName, serviceAccountName string, serviceAccountUID, podUID types.UID) (string, error) {
	tr, err := s.tokens.ServiceAccountToken(ctx, podNamespace, serviceAccountName, &authenticationv1.TokenRequest{
		ObjectMeta: metav1.ObjectMeta{UID: serviceAccountUID},
		Spec: authenticationv1.TokenRequestSpec{
			// expirationSeconds is left to the API server's default.
			Audiences: []string{s.audience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       podName,
				UID:        podUID,
			},
		},
	})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// cacheEntry is one cached answer.
type cacheEntry struct {
	key         string
	credentials map[string]Auth
	expiresAt   time.Time
}

func cacheKeyFunc(obj any) (string, error) {
	return obj.(*cacheEntry).key, nil
}

// cacheExpirationPolicy expires an entry after its expiresAt.
type cacheExpirationPolicy struct {
	clock clock.Clock
}

func (c *cacheExpirationPolicy) IsExpired(entry *cache.TimestampedEntry) bool {
	return c.clock.Now().After(entry.Obj.(*cacheEntry).expiresAt)
}

func newCache(c clock.Clock) cache.Store {
	return cache.NewExpirationStore(cacheKeyFunc, &cacheExpirationPolicy{clock: c})
}

// provide returns the provider's credentials for image and the pod, from
// the cache or by running the plugin. ok is false when the provider is not
// run for it (image not matched; in service account mode, no service
// account when one is required, or a required annotation missing), which
// is not an error.
//
// sa is the service account the credentials were given for (service
// account mode with a service account), nil when they are the node's.
func (p *pluginProvider) provide(ctx context.Context, image string, pod Pod) (auths map[string]Auth, sa *ServiceAccount, ok bool, err error) {
	logger := klog.FromContext(ctx)
	if !p.isImageAllowed(image) {
		return nil, nil, false, nil
	}

	var (
		serviceAccountUID       types.UID
		serviceAccountToken     string
		saAnnotations           map[string]string
		serviceAccountCacheKey  string
		serviceAccountTokenHash string
	)
	serviceAccountName := pod.ServiceAccountName
	if p.serviceAccountProvider != nil {
		if len(serviceAccountName) == 0 && p.serviceAccountProvider.requireServiceAccount {
			logger.V(5).Info("Service account name is empty", "provider", p.name, "image", image, "pod", klog.KRef(pod.Namespace, pod.Name), "podUID", pod.UID)
			return nil, nil, false, nil
		}
		// Without a service account (and not required: e.g. static pods),
		// the plugin runs without a token.
		if len(serviceAccountName) > 0 {
			if serviceAccountUID, saAnnotations, err = p.serviceAccountProvider.getServiceAccountData(ctx, pod.Namespace, serviceAccountName); err != nil {
				if isRequiredAnnotationNotFoundError(err) {
					logger.V(5).Info("Failed to get service account data", "err", err, "provider", p.name, "image", image, "pod", klog.KRef(pod.Namespace, pod.Name), "podUID", pod.UID, "serviceAccount", klog.KRef(pod.Namespace, serviceAccountName))
					return nil, nil, false, nil
				}
				return nil, nil, false, fmt.Errorf("failed to get service account: %w", err)
			}
			if serviceAccountToken, err = p.serviceAccountProvider.getServiceAccountToken(ctx, pod.Namespace, pod.Name, serviceAccountName, serviceAccountUID, pod.UID); err != nil {
				return nil, nil, false, fmt.Errorf("failed to get service account token: %w", err)
			}
			serviceAccountTokenHash = getHashIfNotEmpty(serviceAccountToken)
			serviceAccountCacheKey, err = generateServiceAccountCacheKey(cacheKeyParams{
				namespace:          pod.Namespace,
				serviceAccountName: serviceAccountName,
				serviceAccountUID:  serviceAccountUID,
				saAnnotations:      saAnnotations,
				podName:            pod.Name,
				podUID:             pod.UID,
				saTokenHash:        serviceAccountTokenHash,
				cacheType:          p.serviceAccountProvider.cacheType,
			})
			if err != nil {
				return nil, nil, false, fmt.Errorf("error generating service account cache key: %w", err)
			}
			sa = &ServiceAccount{UID: serviceAccountUID, Namespace: pod.Namespace, Name: serviceAccountName}
		}
	}

	cached, found, err := p.getCachedCredentials(image, serviceAccountCacheKey)
	if err != nil {
		return nil, nil, false, fmt.Errorf("failed to get cached docker config: %w", err)
	}
	if found {
		return maps.Clone(cached), sa, true, nil
	}

	// Concurrent requests for the same image share one execution. The
	// cacheKeyType is not known yet, so requests for different images of
	// one registry each run the plugin. In service account mode the key is
	// the image, the token's hash and the annotations: one execution per
	// pod's token.
	singleFlightKey := image
	if p.serviceAccountProvider != nil && len(serviceAccountName) > 0 {
		if singleFlightKey, err = generateSingleFlightKey(image, serviceAccountTokenHash, saAnnotations); err != nil {
			return nil, nil, false, fmt.Errorf("error generating singleflight key: %w", err)
		}
	}
	// The execution is shared: it does not end with this caller's context
	// (upstream runs it with a background context), but this caller stops
	// waiting when its context ends.
	ch := p.group.DoChan(singleFlightKey, func() (any, error) {
		return p.plugin.ExecPlugin(context.WithoutCancel(ctx), image, serviceAccountToken, saAnnotations)
	})
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return nil, nil, false, ctx.Err()
	}
	if res.Err != nil {
		return nil, nil, false, fmt.Errorf("failed to get credential from external registry credential provider: %w", res.Err)
	}
	response, isResponse := res.Val.(*credentialproviderapi.CredentialProviderResponse)
	if !isResponse || response == nil {
		return nil, nil, false, fmt.Errorf("invalid response type returned by external credential provider: %T", res.Val)
	}

	if len(serviceAccountToken) > 0 && p.serviceAccountProvider.cacheType != configv1.TokenServiceAccountTokenCacheType {
		// Only the Token cache type may hand the token itself back as the
		// registry credentials.
		for _, authConfig := range response.Auth {
			if authConfig.Password == serviceAccountToken {
				return nil, nil, false, fmt.Errorf("credential provider plugin returned the service account token as the password which is not allowed when service account cache type is not set to 'Token'")
			}
		}
	}

	var cacheKey string
	switch cacheKeyType := response.CacheKeyType; cacheKeyType {
	case credentialproviderapi.ImagePluginCacheKeyType:
		cacheKey = image
	case credentialproviderapi.RegistryPluginCacheKeyType:
		cacheKey = parseRegistry(image)
	case credentialproviderapi.GlobalPluginCacheKeyType:
		cacheKey = globalCacheKey
	default:
		return nil, nil, false, fmt.Errorf("credential provider plugin did not return a valid cacheKeyType: %s", cacheKeyType)
	}

	auths = make(map[string]Auth, len(response.Auth))
	for matchImage, authConfig := range response.Auth {
		auths[matchImage] = Auth{Username: authConfig.Username, Password: authConfig.Password}
	}

	expiresAt, doCache := p.expiry(response.CacheDuration)
	if !doCache {
		return auths, sa, true, nil
	}

	cacheKey, err = generateCacheKey(cacheKey, serviceAccountCacheKey)
	if err != nil {
		return nil, nil, false, fmt.Errorf("error generating cache key: %w", err)
	}
	if err := p.cache.Add(&cacheEntry{key: cacheKey, credentials: auths, expiresAt: expiresAt}); err != nil {
		return nil, nil, false, fmt.Errorf("failed to add credentials to cache: %w", err)
	}
	return maps.Clone(auths), sa, true, nil
}

// expiry is when an answer with cacheDuration expires from the cache, and
// whether it is cached at all: a duration of 0 is not cached; none is the
// provider's defaultCacheDuration (not cached when 0).
func (p *pluginProvider) expiry(cacheDuration *metav1.Duration) (time.Time, bool) {
	switch {
	case cacheDuration != nil && cacheDuration.Duration == 0:
		return time.Time{}, false
	case cacheDuration == nil && p.defaultCacheDuration == 0:
		return time.Time{}, false
	case cacheDuration == nil:
		return p.clock.Now().Add(p.defaultCacheDuration), true
	default:
		return p.clock.Now().Add(cacheDuration.Duration), true
	}
}

// isImageAllowed tells whether image matches one of the provider's
// matchImages.
func (p *pluginProvider) isImageAllowed(image string) bool {
	for _, matchImage := range p.matchImages {
		if matched, _ := urlsMatchStr(matchImage, image); matched {
			return true
		}
	}
	return false
}

// getCachedCredentials looks image up in the cache under the image, its
// registry, then the global key (each combined with the service account
// key), dropping expired entries every cachePurgeInterval.
func (p *pluginProvider) getCachedCredentials(image, serviceAccountCacheKey string) (map[string]Auth, bool, error) {
	p.mu.Lock()
	if p.clock.Now().After(p.lastCachePurge.Add(cachePurgeInterval)) {
		// The expiration store drops an expired entry when it is read;
		// List drops those never read again.
		_ = p.cache.List()
		p.lastCachePurge = p.clock.Now()
	}
	p.mu.Unlock()

	for _, baseCacheKey := range []string{image, parseRegistry(image), globalCacheKey} {
		cacheKey, err := generateCacheKey(baseCacheKey, serviceAccountCacheKey)
		if err != nil {
			return nil, false, fmt.Errorf("error generating cache key: %w", err)
		}
		obj, found, err := p.cache.GetByKey(cacheKey)
		if err != nil {
			return nil, false, err
		}
		if found {
			return obj.(*cacheEntry).credentials, true, nil
		}
	}
	return nil, false, nil
}

// execPlugin runs a provider's binary (<bin-dir>/<name> args...) with the
// request on stdin and reads the response from stdout.
type execPlugin struct {
	name         string
	apiVersion   string
	encoder      runtime.Encoder
	args         []string
	envVars      []configv1.ExecEnvVar
	pluginBinDir string
	environ      func() []string
	timeout      time.Duration
	clock        clock.Clock
	metrics      *metrics
}

// ExecPlugin runs the plugin as
//
//	$ <os environment> ENV_NAME=ENV_VALUE <plugin-name> args[0] args[1] <<<request
//
// and returns its response, which must be of the request's apiVersion.
func (e *execPlugin) ExecPlugin(ctx context.Context, image, serviceAccountToken string, serviceAccountAnnotations map[string]string) (*credentialproviderapi.CredentialProviderResponse, error) {
	klog.FromContext(ctx).V(5).Info("Getting image credentials from external exec plugin", "pluginName", e.name, "image", image)

	data, err := e.encodeRequest(&credentialproviderapi.CredentialProviderRequest{
		Image:                     image,
		ServiceAccountToken:       serviceAccountToken,
		ServiceAccountAnnotations: serviceAccountAnnotations,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to encode auth request: %w", err)
	}

	stdout := &bytes.Buffer{}
	stderr := &bytes.Buffer{}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, filepath.Join(e.pluginBinDir, e.name), e.args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = stdout, stderr, bytes.NewReader(data)
	cmd.WaitDelay = execWaitDelay

	var configEnvVars []string
	for _, v := range e.envVars {
		configEnvVars = append(configEnvVars, fmt.Sprintf("%s=%s", v.Name, v.Value))
	}
	// The plugin gets the kubelet's environment, then the configured
	// variables (which win, being last).
	cmd.Env = mergeEnvVars(e.environ(), configEnvVars)

	if err = e.runPlugin(ctx, cmd, image); err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}

	data = stdout.Bytes()
	gvk, err := json.DefaultMetaFactory.Interpret(data)
	if err != nil {
		return nil, fmt.Errorf("error reading GVK from response: %w", err)
	}
	if gvk.GroupVersion().String() != e.apiVersion {
		return nil, fmt.Errorf("apiVersion from credential plugin response did not match expected apiVersion:%s, actual apiVersion:%s", e.apiVersion, gvk.GroupVersion().String())
	}
	response, err := e.decodeResponse(data)
	if err != nil {
		// Not wrapped: it may hold credentials from the response.
		return nil, errors.New("error decoding credential provider plugin response from stdout")
	}
	return response, nil
}

// runPlugin runs cmd, timing it and counting its failures (a non-zero
// exit, a failure to start, the timeout) as upstream does.
func (e *execPlugin) runPlugin(ctx context.Context, cmd *exec.Cmd, image string) error {
	start := e.clock.Now()
	defer func() {
		e.metrics.duration.WithLabelValues(e.name).Observe(e.clock.Since(start).Seconds())
	}()

	err := cmd.Run()
	if ctx.Err() != nil {
		e.metrics.errors.WithLabelValues(e.name).Inc()
		return fmt.Errorf("error execing credential provider plugin %s for image %s: %w", e.name, image, ctx.Err())
	}
	if err != nil {
		e.metrics.errors.WithLabelValues(e.name).Inc()
		return fmt.Errorf("error execing credential provider plugin %s for image %s: %w", e.name, image, err)
	}
	return nil
}

// encodeRequest encodes the request in the provider's apiVersion (JSON).
func (e *execPlugin) encodeRequest(request *credentialproviderapi.CredentialProviderRequest) ([]byte, error) {
	data, err := runtime.Encode(e.encoder, request)
	if err != nil {
		return nil, fmt.Errorf("error encoding request: %w", err)
	}
	return data, nil
}

// decodeResponse decodes a response of any version (strictly) into the
// internal type.
func (e *execPlugin) decodeResponse(data []byte) (*credentialproviderapi.CredentialProviderResponse, error) {
	obj, gvk, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Kind: %q", gvk.Kind)
	}
	if gvk.Group != credentialproviderapi.GroupName {
		return nil, fmt.Errorf("failed to decode CredentialProviderResponse, unexpected Group: %s", gvk.Group)
	}
	if response, ok := obj.(*credentialproviderapi.CredentialProviderResponse); ok {
		return response, nil
	}
	return nil, fmt.Errorf("unable to convert %T to *CredentialProviderResponse", obj)
}

// mergeEnvVars appends the provider's variables to the system's, so that
// they override them.
func mergeEnvVars(sysEnvVars, credProviderVars []string) []string {
	return append(slices.Clip(sysEnvVars), credProviderVars...)
}

// cacheKeyParams are what a service account cache key is made of.
type cacheKeyParams struct {
	namespace          string
	serviceAccountName string
	serviceAccountUID  types.UID
	saAnnotations      map[string]string
	podName            string
	podUID             types.UID
	saTokenHash        string
	cacheType          configv1.ServiceAccountTokenCacheType
}

// cacheKeyBuilder builds keys as upstream's (golang.org/x/crypto's
// cryptobyte): strings with a 2-byte big-endian length prefix, counts as
// 4-byte big-endian integers.
type cacheKeyBuilder struct {
	buf []byte
	err error
}

func newCacheKeyBuilder() *cacheKeyBuilder { return &cacheKeyBuilder{} }

func (c *cacheKeyBuilder) addString(value string) *cacheKeyBuilder {
	if len(value) > 0xffff {
		c.err = fmt.Errorf("cryptobyte: pending child length %d exceeds 2-byte length prefix", len(value))
		return c
	}
	c.buf = binary.BigEndian.AppendUint16(c.buf, uint16(len(value)))
	c.buf = append(c.buf, value...)
	return c
}

func (c *cacheKeyBuilder) addAnnotations(annotations map[string]string) *cacheKeyBuilder {
	keys := slices.Sorted(maps.Keys(annotations))
	c.buf = binary.BigEndian.AppendUint32(c.buf, uint32(len(keys)))
	for _, k := range keys {
		c.addString(k).addString(annotations[k])
	}
	return c
}

func (c *cacheKeyBuilder) build() (string, error) {
	if c.err != nil {
		return "", c.err
	}
	return string(c.buf), nil
}

// generateServiceAccountCacheKey is the service account part of a cache
// key: namespace, name, UID and the annotations passed to the plugin, plus
// the token's hash for the Token cache type. The pod is not part of it.
func generateServiceAccountCacheKey(params cacheKeyParams) (string, error) {
	builder := newCacheKeyBuilder().
		addString(params.namespace).
		addString(params.serviceAccountName).
		addString(string(params.serviceAccountUID)).
		addAnnotations(params.saAnnotations)
	if params.cacheType == configv1.TokenServiceAccountTokenCacheType {
		builder = builder.addString("token").addString(params.saTokenHash)
	}
	return builder.build()
}

// generateCacheKey is the key of a cache entry: the image, registry or
// global key, and the service account key ("" when none).
func generateCacheKey(baseKey, serviceAccountCacheKey string) (string, error) {
	return newCacheKeyBuilder().addString(baseKey).addString(serviceAccountCacheKey).build()
}

func generateSingleFlightKey(image, saTokenHash string, saAnnotations map[string]string) (string, error) {
	return newCacheKeyBuilder().addString(image).addString(saTokenHash).addAnnotations(saAnnotations).build()
}

// getHashIfNotEmpty is "sha256:<hex>" of data, "" for "".
func getHashIfNotEmpty(data string) string {
	if len(data) > 0 {
		return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(data)))
	}
	return ""
}
