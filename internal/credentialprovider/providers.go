package credentialprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"
)

// TokenGetter is the API server access of providers with tokenAttributes
// (in cluster mode, the kubelet's token manager and a service account GET).
type TokenGetter interface {
	// ServiceAccountToken creates a token of the service account
	// namespace/name as upstream's token manager does: tr is the request
	// (audience, BoundObjectRef to the pod, the service account's UID as
	// metadata.uid precondition; expirationSeconds left to the default).
	ServiceAccountToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// ServiceAccount reads a service account (its UID and annotations).
	ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
}

// Config configures the providers.
type Config struct {
	// ConfigPath is --image-credential-provider-config: a
	// CredentialProviderConfig file, or a directory of them. Required.
	ConfigPath string
	// BinDir is --image-credential-provider-bin-dir, where each provider's
	// binary is, under its name. Required.
	BinDir string
	// Tokens gets service account tokens and service accounts; nil (a
	// standalone kubelet) fails the lookups of providers with
	// tokenAttributes for pods with a service account, as upstream does.
	Tokens TokenGetter
	// Registry gets kubelet_credential_provider_plugin_errors_total,
	// kubelet_credential_provider_plugin_duration and
	// kubelet_credential_provider_config_info; nil registers none.
	Registry prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// Pod is the pod an image is pulled for.
type Pod struct {
	Namespace, Name    string
	UID                types.UID
	ServiceAccountName string
}

// Auth is a registry credential a plugin returned.
type Auth struct {
	Username, Password string
}

// Result is what one provider returned for an image: its auth map, keyed by
// registry or image pattern (globs allowed), as a docker config's "auths";
// matching them against the image is the caller's (upstream's keyring).
type Result struct {
	Provider string
	Auths    map[string]Auth
	// ServiceAccount is the pod's service account the credentials were
	// given for (a provider in service account token mode), nil when they
	// are the node's (any pod may use them).
	ServiceAccount *ServiceAccount
}

// ServiceAccount names a service account, as upstream's
// ServiceAccountCoordinates (what image pull records keep).
type ServiceAccount struct {
	UID       types.UID
	Namespace string
	Name      string
}

// ProviderError is the failure of one provider for an image.
type ProviderError struct {
	Provider string
	Image    string
	Err      error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("credential provider %s failed for image %s: %v", e.Provider, e.Image, e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Providers are the configured credential provider plugins.
type Providers struct {
	providers []*pluginProvider
}

// New reads and validates the config at cfg.ConfigPath as upstream's
// RegisterCredentialProviderPlugins does, and checks that each provider's
// binary is in cfg.BinDir.
func New(cfg Config) (*Providers, error) {
	switch {
	case cfg.BinDir == "":
		return nil, errors.New("credentialprovider: Config.BinDir is required")
	case cfg.ConfigPath == "":
		return nil, errors.New("credentialprovider: Config.ConfigPath is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Tokens == nil {
		cfg.Tokens = standaloneTokens{}
	}

	if _, err := os.Stat(cfg.BinDir); err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("plugin binary directory %s did not exist", cfg.BinDir)
		}
		return nil, fmt.Errorf("error inspecting binary directory %s: %w", cfg.BinDir, err)
	}

	config, configHash, err := readCredentialProviderConfig(cfg.ConfigPath)
	if err != nil {
		return nil, err
	}
	// KubeletServiceAccountTokenForCredentialProviders is on in v1.37.
	if errs := validateCredentialProviderConfig(config, true); len(errs) > 0 {
		return nil, fmt.Errorf("failed to validate credential provider config: %v", errs.ToAggregate())
	}

	m := newMetrics()
	ps := &Providers{}
	for _, provider := range config.Providers {
		// LookPath finds a Windows binary's ".exe" and checks the file.
		binPath := filepath.Join(cfg.BinDir, provider.Name)
		if _, err := exec.LookPath(binPath); err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
				return nil, fmt.Errorf("plugin binary executable %s did not exist", binPath)
			}
			return nil, fmt.Errorf("error inspecting binary executable %s: %w", binPath, err)
		}
		p, err := newPluginProvider(cfg, provider, m)
		if err != nil {
			return nil, fmt.Errorf("error initializing plugin provider %s: %w", provider.Name, err)
		}
		ps.providers = append(ps.providers, p)
	}
	m.register(cfg.Registry, configHash)
	return ps, nil
}

func newPluginProvider(cfg Config, provider configv1.CredentialProvider, m *metrics) (*pluginProvider, error) {
	mediaType := "application/json"
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, fmt.Errorf("unsupported media type %q", mediaType)
	}
	gv, ok := apiVersions[provider.APIVersion]
	if !ok {
		return nil, fmt.Errorf("invalid apiVersion: %q", provider.APIVersion)
	}
	return &pluginProvider{
		name:                 provider.Name,
		clock:                cfg.Clock,
		matchImages:          provider.MatchImages,
		cache:                newCache(cfg.Clock),
		defaultCacheDuration: provider.DefaultCacheDuration.Duration,
		lastCachePurge:       cfg.Clock.Now(),
		plugin: &execPlugin{
			name:         provider.Name,
			apiVersion:   provider.APIVersion,
			encoder:      codecs.EncoderForVersion(info.Serializer, gv),
			pluginBinDir: cfg.BinDir,
			args:         provider.Args,
			envVars:      provider.Env,
			environ:      os.Environ,
			timeout:      execTimeout,
			clock:        cfg.Clock,
			metrics:      m,
		},
		serviceAccountProvider: newServiceAccountProvider(provider, cfg.Tokens),
	}, nil
}

// Lookup runs, one after the other in config order, each provider whose
// matchImages match image, for the pod (upstream's
// NewExternalCredentialProviderDockerKeyring and Lookup). image is what
// upstream passes: the image's normalized repository, without tag or
// digest (docker.io/library/busybox). A provider answers from its cache
// when it can. A provider that is not run for the pod (in service account
// mode: no service account when one is required, or a required annotation
// missing from it) gives nothing and no error; one that fails (its exec,
// its response, the token) gives nothing and a *ProviderError in errs.
func (p *Providers) Lookup(ctx context.Context, image string, pod Pod) (results []Result, errs []error) {
	logger := klog.FromContext(ctx)
	for _, pp := range p.providers {
		auths, sa, ok, err := pp.provide(ctx, image, pod)
		if err != nil {
			if pp.serviceAccountProvider != nil {
				logger.Error(err, "Failed to provide credentials for image", "provider", pp.name, "image", image, "pod", klog.KRef(pod.Namespace, pod.Name), "podUID", pod.UID, "serviceAccount", klog.KRef(pod.Namespace, pod.ServiceAccountName))
			} else {
				logger.Error(err, "Failed to provide credentials for image", "provider", pp.name, "image", image)
			}
			errs = append(errs, &ProviderError{Provider: pp.name, Image: image, Err: err})
			continue
		}
		if ok {
			results = append(results, Result{Provider: pp.name, Auths: auths, ServiceAccount: sa})
		}
	}
	return results, errs
}

// standaloneTokens is the TokenGetter of a kubelet without an API server:
// upstream's errors.
type standaloneTokens struct{}

func (standaloneTokens) ServiceAccountToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errors.New("failed to fetch token: cannot use TokenManager when kubelet is in standalone mode")
}

func (standaloneTokens) ServiceAccount(context.Context, string, string) (*v1.ServiceAccount, error) {
	return nil, errors.New("cannot get ServiceAccounts when kubelet is in standalone mode")
}
