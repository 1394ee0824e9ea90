package pullmanager

import (
	"strings"
	"testing"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestNewPolicy(t *testing.T) {
	tests := []struct {
		policy          kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy
		allowlist       []string
		image           string
		pulledByKubelet bool
		want            bool
		wantErr         string
	}{
		{policy: kubeletconfigv1beta1.NeverVerify, pulledByKubelet: true, want: false},
		{policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages, pulledByKubelet: false, want: false},
		{policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages, pulledByKubelet: true, want: true},
		{policy: kubeletconfigv1beta1.AlwaysVerify, want: true},
		{policy: kubeletconfigv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"test.io/*"}, image: "test.io/a:b", pulledByKubelet: true, want: false},
		{policy: kubeletconfigv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"test.io/*"}, image: "other.io/a:b", want: true},
		{policy: kubeletconfigv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"*"}, wantErr: "only patterns ending with '/*' are allowed"},
		{policy: "Sometimes", wantErr: "unknown image pull credential verification policy: Sometimes"},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			p, err := newPolicy(tt.policy, tt.allowlist)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			image := tt.image
			if image == "" {
				image = "test-image:sometag"
			}
			if got := p(image, tt.pulledByKubelet); got != tt.want {
				t.Errorf("policy(%q, %v) = %v, want %v", image, tt.pulledByKubelet, got, tt.want)
			}
		})
	}
}

func TestNewNeverVerifyAllowListedPullPolicy(t *testing.T) {
	const basicTestImage = "test.io/test/test-image:tag"
	tests := []struct {
		name              string
		imageRecordsExist bool
		inputImage        string
		allowlist         []string
		expectedAbsolutes int
		expectedWildcards int
		want              bool
		wantErr           bool
	}{
		{name: "there are no records about the image being pulled, not in allowlist", inputImage: basicTestImage, want: true,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "test.io/test/image3"}, expectedAbsolutes: 3},
		{name: "there are records about the image being pulled, not in allowlist", imageRecordsExist: true, inputImage: basicTestImage, want: true,
			allowlist: []string{"test.io/test/image1", "test.io/test/image3", "test.io/test/image2", "test.io/test/image3"}, expectedAbsolutes: 3},
		{name: "there are no records about the image being pulled, appears in allowlist", inputImage: basicTestImage, want: false,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "test.io/test/test-image", "test.io/test/image3"}, expectedAbsolutes: 4},
		{name: "there are records about the image being pulled, appears in allowlist", imageRecordsExist: true, inputImage: basicTestImage, want: false,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "test.io/test/test-image", "test.io/test/image3"}, expectedAbsolutes: 4},
		{name: "invalid allowlist pattern - wildcard in the middle", inputImage: basicTestImage, wantErr: true, allowlist: []string{"image.repo/pokus*/imagename"}},
		{name: "invalid allowlist pattern - trailing non-segment wildcard middle", inputImage: basicTestImage, wantErr: true, allowlist: []string{"image.repo/pokus*"}},
		{name: "invalid allowlist pattern - wildcard path segment in the middle", inputImage: basicTestImage, wantErr: true, allowlist: []string{"image.repo/*/imagename"}},
		{name: "invalid allowlist pattern - only wildcard segment", inputImage: basicTestImage, wantErr: true, allowlist: []string{"/*"}},
		{name: "invalid allowlist pattern - ends with a '/'", inputImage: basicTestImage, wantErr: true, allowlist: []string{"image.repo/"}},
		{name: "invalid allowlist pattern - empty", inputImage: basicTestImage, wantErr: true, allowlist: []string{""}},
		{name: "invalid allowlist pattern - asterisk", inputImage: basicTestImage, wantErr: true, allowlist: []string{"*"}},
		{name: "invalid allowlist pattern - image with a tag", inputImage: basicTestImage, wantErr: true, allowlist: []string{"test.io/test/image1:tagged"}},
		{name: "invalid allowlist pattern - image with a digest", inputImage: basicTestImage, wantErr: true,
			allowlist: []string{"test.io/test/image1@sha256:38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd"}},
		{name: "invalid allowlist pattern - trailing whitespace", inputImage: basicTestImage, wantErr: true, allowlist: []string{"test.io/test/image1 "}},
		{name: "there are no records about the image being pulled, not in allowlist - different repo wildcard", inputImage: basicTestImage, want: true,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "different.repo/test/*"}, expectedAbsolutes: 2, expectedWildcards: 1},
		{name: "there are no records about the image being pulled, not in allowlist - matches org wildcard", inputImage: basicTestImage, want: false,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "test.io/test/*"}, expectedAbsolutes: 2, expectedWildcards: 1},
		{name: "there are no records about the image being pulled, not in allowlist - matches repo wildcard", inputImage: basicTestImage, want: false,
			allowlist: []string{"test.io/test/image1", "test.io/test/image2", "test.io/*"}, expectedAbsolutes: 2, expectedWildcards: 1},
		{name: "'familiar' image name with docker-disambiguated fqdn in the allowlist - not a match", inputImage: "ubuntu", want: true,
			allowlist: []string{"docker.io/library/ubuntu"}, expectedAbsolutes: 1},
		{name: "'familiar' image name with docker-disambiguated wildcard in the allowlist - not a match", inputImage: "ubuntu", want: true,
			allowlist: []string{"docker.io/library/*"}, expectedWildcards: 1},
		{name: "'familiar' image name with 'familiar' image matching it in the allowlist", inputImage: "ubuntu", want: false,
			allowlist: []string{"ubuntu"}, expectedAbsolutes: 1},
		{name: "'familiar' image name with a tag with 'familiar' image matching it in the allowlist", inputImage: "ubuntu:tagged", want: false,
			allowlist: []string{"ubuntu"}, expectedAbsolutes: 1},
		{name: "'familiar' image name with a digest with 'familiar' image matching it in the allowlist",
			inputImage: "ubuntu@sha256:38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd", want: false,
			allowlist: []string{"ubuntu"}, expectedAbsolutes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newAllowlistPolicy(tt.allowlist)
			if tt.wantErr != (err != nil) {
				t.Fatalf("wanted error: %t, got: %v", tt.wantErr, err)
			}
			if err != nil {
				if ValidateAllowlistImagesPatterns(tt.allowlist) == nil {
					t.Errorf("ValidateAllowlistImagesPatterns(%q) accepts what the policy refuses", tt.allowlist)
				}
				return
			}
			if len(p.absoluteURLs) != tt.expectedAbsolutes {
				t.Errorf("%d absolute image URLs, want %d: %v", len(p.absoluteURLs), tt.expectedAbsolutes, p.absoluteURLs)
			}
			if len(p.prefixes) != tt.expectedWildcards {
				t.Errorf("%d wildcard image URLs, want %d: %v", len(p.prefixes), tt.expectedWildcards, p.prefixes)
			}
			if got := p.requireVerification(tt.inputImage, tt.imageRecordsExist); got != tt.want {
				t.Errorf("requireVerification() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAllowlistPatternErrors(t *testing.T) {
	tests := map[string]string{
		" a.io/b":                          "leading/trailing spaces are not allowed:  a.io/b",
		"":                                 "the supplied pattern is too short: ",
		"a.io/*/b":                         "not a valid wildcard pattern, only patterns ending with '/*' are allowed: a.io/*/b",
		"/*":                               "at least registry hostname is required",
		"a.io/b:v1":                        "neither tag nor digest is accepted in an image reference: a.io/b:v1",
		"A.io/B":                           "failed to parse as an image name: repository name must be lowercase",
		"a.io/b/":                          "failed to parse as an image name: invalid reference format",
		"a.io/b@sha256:" + hex64("A"):      "failed to parse as an image name: invalid checksum digest format",
		"a.io/b@sha256:" + hex64("a")[:40]: "failed to parse as an image name: invalid checksum digest length",
		"a.io/b@md5:" + hex64("a"):         "failed to parse as an image name: unsupported digest algorithm",
		"a.io/" + strings.Repeat("b", 256): "failed to parse as an image name: repository name must not be more than 255 characters",
	}
	for pattern, want := range tests {
		err := ValidateAllowlistImagesPatterns([]string{"ok.io/fine", pattern})
		if err == nil || err.Error() != want {
			t.Errorf("ValidateAllowlistImagesPatterns(%q) = %v, want %q", pattern, err, want)
		}
	}
}

func hex64(c string) string { return strings.Repeat(c, 64) }

func TestValidate(t *testing.T) {
	tests := []struct {
		name      string
		policy    kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy
		allowlist []string
		want      []string
	}{
		{name: "valid", policy: kubeletconfigv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"a.io/*"}},
		{name: "valid without allowlist", policy: kubeletconfigv1beta1.AlwaysVerify},
		{name: "unknown policy", policy: "Sometimes", want: []string{
			`invalid configuration: option "Sometimes" specified for imagePullCredentialsVerificationPolicy. Valid options are "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages" or "AlwaysVerify"`}},
		{name: "allowlist with another policy", policy: kubeletconfigv1beta1.NeverVerify, allowlist: []string{"a.io/*"}, want: []string{
			"invalid configuration: can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""}},
		{name: "bad pattern", policy: kubeletconfigv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"*"}, want: []string{
			"invalid configuration: invalid image pattern in `preloadedImagesVerificationAllowlist`: not a valid wildcard pattern, only patterns ending with '/*' are allowed: *"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range Validate(tt.policy, tt.allowlist) {
				got = append(got, err.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTrimImageTagDigest(t *testing.T) {
	const dgst = "sha256:38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd"
	tests := []struct {
		name    string
		image   string
		want    string
		wantErr bool
	}{
		{name: "'familiar' image name, no tag or digest", image: "myimage", want: "myimage"},
		{name: "'familiar' image name with tag", image: "myimage:latest", want: "myimage"},
		{name: "'familiar' image name with digest", image: "myimage@" + dgst, want: "myimage"},
		{name: "'familiar' image name with tag and digest", image: "myimage:v1@" + dgst, want: "myimage"},
		{name: "single path segment, no tag", image: "registry.io/myimage", want: "registry.io/myimage"},
		{name: "single path segment with tag", image: "registry.io/myimage:v1.0", want: "registry.io/myimage"},
		{name: "single path segment with digest", image: "registry.io/myimage@" + dgst, want: "registry.io/myimage"},
		{name: "single path segment with tag and digest", image: "registry.io/myimage:latest@" + dgst, want: "registry.io/myimage"},
		{name: "domain and two path segments, no tag", image: "registry.io/myorg/myimage", want: "registry.io/myorg/myimage"},
		{name: "domain and two path segments with tag", image: "registry.io/myorg/myimage:v2", want: "registry.io/myorg/myimage"},
		{name: "domain and two path segments with digest", image: "registry.io/myorg/myimage@" + dgst, want: "registry.io/myorg/myimage"},
		{name: "domain and two path segments with tag and digest", image: "registry.io/myorg/myimage:v2@" + dgst, want: "registry.io/myorg/myimage"},
		{name: "deep path and tag", image: "registry.io/a/b/c/myimage:latest", want: "registry.io/a/b/c/myimage"},
		{name: "image name ends with slash", image: "registry.io/myorg/", wantErr: true},
		{name: "last segment is only a tag", image: "registry.io/myorg/:tag", wantErr: true},
		{name: "last segment is only a digest", image: "registry.io/myorg/@" + dgst, wantErr: true},
		{name: "domain with port and tag", image: "localhost:5000/myimage:v1", want: "localhost:5000/myimage"},
		{name: "domain with port, org, and tag", image: "myregistry:5000/myorg/myimage:v1", want: "myregistry:5000/myorg/myimage"},
		{name: "ipv6 domain with port", image: "[::1]:5000/myimage:v1", want: "[::1]:5000/myimage"},
		{name: "multiple occurrences of tag", image: "docker.io/taghere/image:taghere", want: "docker.io/taghere/image"},
		{name: "multiple occurrences of digest",
			image: "registry.io/38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd/myorg/image@" + dgst,
			want:  "registry.io/38a8906435c4dd5f4258899d46621bfd8eea3ad6ff494ee3c2f17ef0321625bd/myorg/image"},
		{name: "empty", image: "", wantErr: true},
		{name: "uppercase path", image: "registry.io/MyImage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trimImageTagDigest(tt.image)
			if (err != nil) != tt.wantErr {
				t.Fatalf("trimImageTagDigest(%q) error = %v, wantErr %v", tt.image, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("trimImageTagDigest(%q) = %q, want %q", tt.image, got, tt.want)
			}
		})
	}
}
