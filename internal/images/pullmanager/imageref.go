package pullmanager

import (
	"fmt"
	"strings"

	imageref "github.com/distribution/reference"
)

// trimImageTagDigest trims digest and tag from an image name, as
// upstream's (reference.Parse's errors for an invalid reference).
func trimImageTagDigest(image string) (string, error) {
	parsed, err := imageref.Parse(image)
	if err != nil {
		return "", err
	}
	var tag, digest string
	if tagged, ok := parsed.(imageref.Tagged); ok {
		tag = tagged.Tag()
	}
	if digested, ok := parsed.(imageref.Digested); ok {
		digest = digested.Digest().String()
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
