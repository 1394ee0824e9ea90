package pullmanager

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// requireVerification is a credential verification policy: whether a pod
// using image, already on the node, must have its credentials verified.
// imagePulledByKubelet says a pulled record or a pull intent exists for it.
type requireVerification func(image string, imagePulledByKubelet bool) bool

// newPolicy is upstream's NewImagePullCredentialVerificationPolicy.
func newPolicy(policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy, allowlist []string) (requireVerification, error) {
	switch policy {
	case kubeletconfigv1beta1.NeverVerify:
		return neverVerify, nil
	case kubeletconfigv1beta1.NeverVerifyPreloadedImages:
		return neverVerifyPreloaded, nil
	case kubeletconfigv1beta1.NeverVerifyAllowlistedImages:
		p, err := newAllowlistPolicy(allowlist)
		if err != nil {
			return nil, err
		}
		return p.requireVerification, nil
	case kubeletconfigv1beta1.AlwaysVerify:
		return alwaysVerify, nil
	}
	return nil, fmt.Errorf("unknown image pull credential verification policy: %v", policy)
}

func neverVerify(string, bool) bool { return false }

// neverVerifyPreloaded verifies only the images the kubelet pulled.
func neverVerifyPreloaded(_ string, imagePulledByKubelet bool) bool { return imagePulledByKubelet }

func alwaysVerify(string, bool) bool { return true }

// allowlistPolicy is NeverVerifyAllowlistedImages: images matching the
// allowlist are never verified, all others are.
type allowlistPolicy struct {
	absoluteURLs sets.Set[string]
	prefixes     []string
}

func newAllowlistPolicy(allowlist []string) (*allowlistPolicy, error) {
	p := &allowlistPolicy{absoluteURLs: sets.New[string]()}
	for _, pattern := range allowlist {
		normalized, isWildcard, err := allowlistImagePattern(pattern)
		if err != nil {
			return nil, err
		}
		if isWildcard {
			p.prefixes = append(p.prefixes, normalized)
		} else {
			p.absoluteURLs.Insert(normalized)
		}
	}
	return p, nil
}

func (p *allowlistPolicy) requireVerification(image string, _ bool) bool {
	return !p.imageMatches(image)
}

func (p *allowlistPolicy) imageMatches(image string) bool {
	name, err := trimImageTagDigest(image)
	if err != nil {
		// best effort: still match what the user gave
		name = image
	}
	if p.absoluteURLs.Has(name) {
		return true
	}
	for _, prefix := range p.prefixes {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// ValidateAllowlistImagesPatterns checks the preloadedImagesVerificationAllowlist
// entries as upstream: an image name without tag or digest, or a prefix
// ending in "/*" (at least a registry host before it), no surrounding spaces.
func ValidateAllowlistImagesPatterns(patterns []string) error {
	for _, p := range patterns {
		if _, _, err := allowlistImagePattern(p); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks imagePullCredentialsVerificationPolicy (as defaulted) and
// preloadedImagesVerificationAllowlist as upstream's KubeletConfiguration
// validation does with KubeletEnsureSecretPulledImages on, with its messages.
func Validate(policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy, allowlist []string) []error {
	var errs []error
	switch policy {
	case kubeletconfigv1beta1.NeverVerify, kubeletconfigv1beta1.NeverVerifyPreloadedImages,
		kubeletconfigv1beta1.NeverVerifyAllowlistedImages, kubeletconfigv1beta1.AlwaysVerify:
	default:
		errs = append(errs, fmt.Errorf("invalid configuration: option %q specified for imagePullCredentialsVerificationPolicy. Valid options are %q, %q, %q or %q",
			policy, kubeletconfigv1beta1.NeverVerify, kubeletconfigv1beta1.NeverVerifyPreloadedImages, kubeletconfigv1beta1.NeverVerifyAllowlistedImages, kubeletconfigv1beta1.AlwaysVerify))
	}
	if len(allowlist) > 0 && policy != kubeletconfigv1beta1.NeverVerifyAllowlistedImages {
		errs = append(errs, errors.New("invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""))
	} else if err := ValidateAllowlistImagesPatterns(allowlist); err != nil {
		errs = append(errs, fmt.Errorf("invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: %w", err))
	}
	return errs
}

// allowlistImagePattern returns the normalized pattern and whether it is a
// "/*" prefix.
func allowlistImagePattern(pattern string) (string, bool, error) {
	if pattern != strings.TrimSpace(pattern) {
		return "", false, fmt.Errorf("leading/trailing spaces are not allowed: %s", pattern)
	}
	trimmed, isWildcard := pattern, false
	if strings.HasSuffix(pattern, "/*") {
		isWildcard = true
		trimmed = strings.TrimSuffix(trimmed, "*")
	}
	if len(trimmed) == 0 {
		return "", false, fmt.Errorf("the supplied pattern is too short: %s", pattern)
	}
	if strings.ContainsRune(trimmed, '*') {
		return "", false, fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", pattern)
	}
	if isWildcard {
		if len(trimmed) == 1 {
			return "", false, fmt.Errorf("at least registry hostname is required")
		}
		return trimmed, true, nil
	}
	image, err := trimImageTagDigest(trimmed)
	if err != nil {
		return "", false, fmt.Errorf("failed to parse as an image name: %w", err)
	}
	if trimmed != image {
		return "", false, fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", pattern)
	}
	return trimmed, false, nil
}
