package credentialprovider

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kubelet/config/v1"
	configv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	configv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubelet/pkg/apis/credentialprovider/install"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	credentialproviderv1alpha1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1alpha1"
	credentialproviderv1beta1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1beta1"
)

var (
	// scheme holds the CredentialProviderConfig versions (kubelet.config.k8s.io
	// v1alpha1, v1beta1, v1) and the credentialprovider.kubelet.k8s.io API
	// (internal and versioned request/response), as upstream's plugin scheme.
	scheme = runtime.NewScheme()
	// codecs decode strictly: unknown and duplicate fields are errors.
	codecs = serializer.NewCodecFactory(scheme, serializer.EnableStrict)

	// apiVersions are the request/response versions a provider may use.
	apiVersions = map[string]schema.GroupVersion{
		credentialproviderv1alpha1.SchemeGroupVersion.String(): credentialproviderv1alpha1.SchemeGroupVersion,
		credentialproviderv1beta1.SchemeGroupVersion.String():  credentialproviderv1beta1.SchemeGroupVersion,
		credentialproviderv1.SchemeGroupVersion.String():       credentialproviderv1.SchemeGroupVersion,
	}

	validCacheTypes = sets.New[string](
		string(configv1.ServiceAccountServiceAccountTokenCacheType),
		string(configv1.TokenServiceAccountTokenCacheType),
	)
)

func init() {
	install.Install(scheme)
	utilruntime.Must(configv1alpha1.AddToScheme(scheme))
	utilruntime.Must(configv1beta1.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}

// readCredentialProviderConfig reads the config at configPath: a file, or a
// directory whose *.json, *.yaml and *.yml files are decoded in
// lexicographic order and their providers merged (a name twice is an
// error). It also returns "sha256:<hex>" of the raw contents (each file
// length-prefixed), exposed as kubelet_credential_provider_config_info.
func readCredentialProviderConfig(configPath string) (*configv1.CredentialProviderConfig, string, error) {
	if configPath == "" {
		return nil, "", fmt.Errorf("credential provider config path is empty")
	}

	fileInfo, err := os.Stat(configPath)
	if err != nil {
		return nil, "", fmt.Errorf("unable to access path %q: %w", configPath, err)
	}

	var configFiles []string
	if fileInfo.IsDir() {
		entries, err := os.ReadDir(configPath)
		if err != nil {
			return nil, "", fmt.Errorf("unable to read directory %q: %w", configPath, err)
		}
		for _, entry := range entries {
			ext := filepath.Ext(entry.Name())
			if !entry.IsDir() && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
				configFiles = append(configFiles, filepath.Join(configPath, entry.Name()))
			}
		}
		sort.Strings(configFiles)
		if len(configFiles) == 0 {
			return nil, "", fmt.Errorf("no configuration files found in directory %q", configPath)
		}
	} else {
		configFiles = append(configFiles, configPath)
	}

	var configs []*configv1.CredentialProviderConfig
	hasher := sha256.New()
	for _, filePath := range configFiles {
		data, err := os.ReadFile(filePath)
		if err != nil {
			return nil, "", fmt.Errorf("unable to read file %q: %w", filePath, err)
		}
		// The length prefix prevents hash collisions between file splits.
		if err := binary.Write(hasher, binary.BigEndian, uint64(len(data))); err != nil {
			return nil, "", fmt.Errorf("error writing length prefix for file %q: %w", filePath, err)
		}
		hasher.Write(data)

		config, err := decode(data)
		if err != nil {
			return nil, "", fmt.Errorf("error decoding config %q: %w", filePath, err)
		}
		configs = append(configs, config)
	}

	merged := &configv1.CredentialProviderConfig{}
	names := sets.New[string]()
	for _, config := range configs {
		for _, provider := range config.Providers {
			if names.Has(provider.Name) {
				return nil, "", fmt.Errorf("duplicate provider name %q found in configuration file(s)", provider.Name)
			}
			names.Insert(provider.Name)
			merged.Providers = append(merged.Providers, provider)
		}
	}
	return merged, fmt.Sprintf("sha256:%x", hasher.Sum(nil)), nil
}

// decode decodes data (JSON or YAML, strictly) of any CredentialProviderConfig
// version into the v1 type, upstream's internal one (v1alpha1 and v1beta1
// lack only tokenAttributes).
func decode(data []byte) (*configv1.CredentialProviderConfig, error) {
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "CredentialProviderConfig" {
		return nil, fmt.Errorf("failed to decode %q (wrong Kind)", gvk.Kind)
	}
	if gvk.Group != configv1.GroupName {
		return nil, fmt.Errorf("failed to decode CredentialProviderConfig, unexpected Group: %s", gvk.Group)
	}

	out := &configv1.CredentialProviderConfig{}
	switch in := obj.(type) {
	case *configv1.CredentialProviderConfig:
		out.Providers = in.Providers
	case *configv1beta1.CredentialProviderConfig:
		for _, p := range in.Providers {
			out.Providers = append(out.Providers, configv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: convertEnv(p.Env, func(e configv1beta1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
	case *configv1alpha1.CredentialProviderConfig:
		for _, p := range in.Providers {
			out.Providers = append(out.Providers, configv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: convertEnv(p.Env, func(e configv1alpha1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
	default:
		return nil, fmt.Errorf("unable to convert %T to *CredentialProviderConfig", obj)
	}
	return out, nil
}

func convertEnv[E any](in []E, nv func(E) (string, string)) []configv1.ExecEnvVar {
	if in == nil {
		return nil
	}
	out := make([]configv1.ExecEnvVar, 0, len(in))
	for _, e := range in {
		n, v := nv(e)
		out = append(out, configv1.ExecEnvVar{Name: n, Value: v})
	}
	return out
}

// validateCredentialProviderConfig is upstream's validation of the merged
// config; saTokenForCredentialProviders is the
// KubeletServiceAccountTokenForCredentialProviders gate (true in v1.37).
func validateCredentialProviderConfig(config *configv1.CredentialProviderConfig, saTokenForCredentialProviders bool) field.ErrorList {
	allErrs := field.ErrorList{}

	if len(config.Providers) == 0 {
		allErrs = append(allErrs, field.Required(field.NewPath("providers"), "at least 1 item in plugins is required"))
	}

	fieldPath := field.NewPath("providers")
	seenProviderNames := sets.New[string]()
	for _, provider := range config.Providers {
		if strings.Contains(provider.Name, "/") {
			allErrs = append(allErrs, field.Invalid(fieldPath.Child("name"), provider.Name, "provider name cannot contain '/'"))
		}
		if strings.Contains(provider.Name, " ") {
			allErrs = append(allErrs, field.Invalid(fieldPath.Child("name"), provider.Name, "provider name cannot contain spaces"))
		}
		if provider.Name == "." {
			allErrs = append(allErrs, field.Invalid(fieldPath.Child("name"), provider.Name, "provider name cannot be '.'"))
		}
		if provider.Name == ".." {
			allErrs = append(allErrs, field.Invalid(fieldPath.Child("name"), provider.Name, "provider name cannot be '..'"))
		}
		if seenProviderNames.Has(provider.Name) {
			allErrs = append(allErrs, field.Duplicate(fieldPath.Child("name"), provider.Name))
		}
		seenProviderNames.Insert(provider.Name)

		if provider.APIVersion == "" {
			allErrs = append(allErrs, field.Required(fieldPath.Child("apiVersion"), ""))
		} else if _, ok := apiVersions[provider.APIVersion]; !ok {
			allErrs = append(allErrs, field.NotSupported(fieldPath.Child("apiVersion"), provider.APIVersion, sets.List(sets.KeySet(apiVersions))))
		}

		if len(provider.MatchImages) == 0 {
			allErrs = append(allErrs, field.Required(fieldPath.Child("matchImages"), "at least 1 item in matchImages is required"))
		}
		for _, matchImage := range provider.MatchImages {
			if _, err := parseSchemelessURL(matchImage); err != nil {
				allErrs = append(allErrs, field.Invalid(fieldPath.Child("matchImages"), matchImage, fmt.Sprintf("match image is invalid: %s", err.Error())))
			}
		}

		if provider.DefaultCacheDuration == nil {
			allErrs = append(allErrs, field.Required(fieldPath.Child("defaultCacheDuration"), ""))
		}
		if provider.DefaultCacheDuration != nil && provider.DefaultCacheDuration.Duration < 0 {
			allErrs = append(allErrs, field.Invalid(fieldPath.Child("defaultCacheDuration"), provider.DefaultCacheDuration, "must be greater than or equal to 0"))
		}

		if provider.TokenAttributes != nil {
			fldPath := fieldPath.Child("tokenAttributes")
			attrs := provider.TokenAttributes
			if !saTokenForCredentialProviders {
				allErrs = append(allErrs, field.Forbidden(fldPath, "tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"))
			}
			if len(attrs.ServiceAccountTokenAudience) == 0 {
				allErrs = append(allErrs, field.Required(fldPath.Child("serviceAccountTokenAudience"), ""))
			}
			if attrs.RequireServiceAccount == nil {
				allErrs = append(allErrs, field.Required(fldPath.Child("requireServiceAccount"), ""))
			}
			if provider.APIVersion != credentialproviderv1.SchemeGroupVersion.String() {
				allErrs = append(allErrs, field.Forbidden(fldPath, fmt.Sprintf("tokenAttributes is only supported for %s API version", credentialproviderv1.SchemeGroupVersion.String())))
			}
			if attrs.RequireServiceAccount != nil && !*attrs.RequireServiceAccount && len(attrs.RequiredServiceAccountAnnotationKeys) > 0 {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child("requiredServiceAccountAnnotationKeys"), "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"))
			}

			allErrs = append(allErrs, validateServiceAccountAnnotationKeys(fldPath.Child("requiredServiceAccountAnnotationKeys"), attrs.RequiredServiceAccountAnnotationKeys)...)
			allErrs = append(allErrs, validateServiceAccountAnnotationKeys(fldPath.Child("optionalServiceAccountAnnotationKeys"), attrs.OptionalServiceAccountAnnotationKeys)...)

			required := sets.New[string](attrs.RequiredServiceAccountAnnotationKeys...)
			optional := sets.New[string](attrs.OptionalServiceAccountAnnotationKeys...)
			if dup := required.Intersection(optional); dup.Len() > 0 {
				allErrs = append(allErrs, field.Invalid(fldPath, sets.List(dup), "annotation keys cannot be both required and optional"))
			}

			switch {
			case len(attrs.CacheType) == 0:
				allErrs = append(allErrs, field.Required(fldPath.Child("cacheType"), fmt.Sprintf("cacheType is required to be set when tokenAttributes is specified. Supported values are: %s", strings.Join(sets.List(validCacheTypes), ", "))))
			case validCacheTypes.Has(string(attrs.CacheType)):
			default:
				allErrs = append(allErrs, field.NotSupported(fldPath.Child("cacheType"), attrs.CacheType, sets.List(validCacheTypes)))
			}
		}
	}
	return allErrs
}

// validateServiceAccountAnnotationKeys checks keys as metav1.ObjectMeta's
// annotation keys are (qualified names, case-insensitive), and unique.
func validateServiceAccountAnnotationKeys(fldPath *field.Path, keys []string) field.ErrorList {
	allErrs := field.ErrorList{}
	seen := sets.New[string]()
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			allErrs = append(allErrs, field.Invalid(fldPath, k, msg))
		}
		if seen.Has(k) {
			allErrs = append(allErrs, field.Duplicate(fldPath, k))
		}
		seen.Insert(k)
	}
	return allErrs
}
