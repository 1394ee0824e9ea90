package pullmanager

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The image reference grammar of github.com/distribution/reference v0.6.0
// (reference.Parse, what upstream trims tags and digests with) and
// github.com/opencontainers/go-digest's checks of a digest.
const (
	refAlphanumeric        = `[a-z0-9]+`
	refSeparator           = `(?:[._]|__|[-]+)`
	refDomainNameComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refOptionalPort        = `(?::[0-9]+)?`
	refTag                 = `[\w][\w.-]{0,127}`
	refDigest              = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`
	refIPv6Address         = `\[(?:[a-fA-F0-9:]+)\]`

	refDomainAndPort = `(?:` + refDomainNameComponent + `(?:\.` + refDomainNameComponent + `)*|` + refIPv6Address + `)` + refOptionalPort
	refPathComponent = refAlphanumeric + `(?:` + refSeparator + refAlphanumeric + `)*`
	refRemoteName    = refPathComponent + `(?:/` + refPathComponent + `)*`
	refName          = `(?:` + refDomainAndPort + `/)?` + refRemoteName

	repositoryNameTotalLengthMax = 255
)

var (
	referenceRegexp      = regexp.MustCompile(`^(` + refName + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
	anchoredNameRegexp   = regexp.MustCompile(`^(?:(` + refDomainAndPort + `)/)?(` + refRemoteName + `)$`)
	digestRegexpAnchored = regexp.MustCompile(`^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$`)
	lowerHexRegexp       = regexp.MustCompile(`^[a-f0-9]+$`)

	// digestSizes are go-digest's available algorithms and their sizes.
	digestSizes = map[string]int{"sha256": 32, "sha384": 48, "sha512": 64}

	errReferenceInvalidFormat = errors.New("invalid reference format")
	errNameContainsUppercase  = errors.New("repository name must be lowercase")
	errNameEmpty              = errors.New("repository name must have at least one component")
	errNameTooLong            = fmt.Errorf("repository name must not be more than %v characters", repositoryNameTotalLengthMax)
	errDigestInvalidFormat    = errors.New("invalid checksum digest format")
	errDigestInvalidLength    = errors.New("invalid checksum digest length")
	errDigestUnsupported      = errors.New("unsupported digest algorithm")
)

// parseReference returns the tag and digest of the image reference s, or
// reference.Parse's error.
func parseReference(s string) (tag, digest string, err error) {
	m := referenceRegexp.FindStringSubmatch(s)
	if m == nil {
		switch {
		case s == "":
			return "", "", errNameEmpty
		case referenceRegexp.MatchString(strings.ToLower(s)):
			return "", "", errNameContainsUppercase
		}
		return "", "", errReferenceInvalidFormat
	}
	path := m[1]
	if nm := anchoredNameRegexp.FindStringSubmatch(m[1]); len(nm) == 3 {
		path = nm[2]
	}
	if len(path) > repositoryNameTotalLengthMax {
		return "", "", errNameTooLong
	}
	if m[3] != "" {
		if err := validateDigest(m[3]); err != nil {
			return "", "", err
		}
	}
	return m[2], m[3], nil
}

// validateDigest is go-digest's Digest.Validate.
func validateDigest(s string) error {
	i := strings.Index(s, ":")
	if i <= 0 || i+1 == len(s) {
		return errDigestInvalidFormat
	}
	size, ok := digestSizes[s[:i]]
	switch {
	case !ok && !digestRegexpAnchored.MatchString(s):
		return errDigestInvalidFormat
	case !ok:
		return errDigestUnsupported
	case len(s[i+1:]) != 2*size:
		return errDigestInvalidLength
	case !lowerHexRegexp.MatchString(s[i+1:]):
		return errDigestInvalidFormat
	}
	return nil
}

// trimImageTagDigest trims digest and tag from an image name.
func trimImageTagDigest(image string) (string, error) {
	tag, digest, err := parseReference(image)
	if err != nil {
		return "", err
	}
	if len(digest) > 0 {
		var found bool
		if image, found = strings.CutSuffix(image, "@"+digest); !found {
			return "", fmt.Errorf("digest was not specified last, this does not appear to be a valid image spec: %q", image)
		}
	}
	if len(tag) > 0 {
		var found bool
		if image, found = strings.CutSuffix(image, ":"+tag); !found {
			return "", fmt.Errorf("tag %q was not specified last (or before the digest), this does not appear to be a valid image spec: %q", tag, image)
		}
	}
	return image, nil
}
