// Command imagecopy copies an image between two plain-HTTP loopback
// registries, with basic-auth credentials for the destination. The harness
// uses it to put the busybox test image into the private registry, with a
// label so that the copy is an image of its own (another ID): removing it
// from containerd does not remove the public one.
//
//	imagecopy --src 127.0.0.1:35000/library/busybox:1.36 \
//	    --dst 127.0.0.1:35001/private/busybox:1.36 --user U --password-file F \
//	    --label org.nodelet.test=private
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	src := flag.String("src", "", "image to copy (plain HTTP, anonymous)")
	dst := flag.String("dst", "", "where to copy it (plain HTTP)")
	user := flag.String("user", "", "user name for the destination")
	passwordFile := flag.String("password-file", "", "file holding the destination's password")
	label := flag.String("label", "", "key=value label added to the image's config")
	flag.Parse()
	if err := run(*src, *dst, *user, *passwordFile, *label); err != nil {
		log.Fatalf("imagecopy: %v", err)
	}
}

func run(src, dst, user, passwordFile, label string) error {
	if src == "" || dst == "" {
		return fmt.Errorf("--src and --dst are required")
	}
	srcRef, err := name.ParseReference(src, name.Insecure)
	if err != nil {
		return err
	}
	dstRef, err := name.ParseReference(dst, name.Insecure)
	if err != nil {
		return err
	}
	auth := authn.Anonymous
	if user != "" {
		pw, err := os.ReadFile(passwordFile)
		if err != nil {
			return err
		}
		auth = &authn.Basic{Username: user, Password: strings.TrimSpace(string(pw))}
	}
	img, err := remote.Image(srcRef)
	if err != nil {
		return fmt.Errorf("read %s: %w", srcRef, err)
	}
	if k, v, ok := strings.Cut(label, "="); ok {
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels[k] = v
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
	}
	if err := remote.Write(dstRef, img, remote.WithAuth(auth)); err != nil {
		return fmt.Errorf("write %s: %w", dstRef, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	log.Printf("imagecopy: %s -> %s (%s)", srcRef, dstRef, d)
	return nil
}
