// Command testregistry serves the test images from an in-process OCI registry
// on a loopback address, so that image pulls in tests are real pulls without
// any network. It builds the images at start (from a static pause binary and
// Debian's busybox-static) and pushes them into itself under the repository
// paths their real names map to through containerd's hosts.toml mirrors:
//
//	registry.k8s.io/pause:3.10        -> <addr>/pause:3.10
//	docker.io/library/busybox:1.36    -> <addr>/library/busybox:1.36 (and :latest)
//
// With --slow-images N it also serves N distinct busybox images
// <addr>/slow/busybox:1 .. :N (each with its own config, so its own digest),
// and every manifest request under <addr>/v2/slow/ waits --slow-delay first:
// a pull of one of them costs two delays (the tag is resolved, then the
// manifest fetched by digest) whatever containerd already has, which makes
// the parallelism of pulls measurable. Other repositories are never delayed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/nodelet/nodelet/hack/tools/imagebuild"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:35000", "loopback address to serve on")
	pausePath := flag.String("pause", "", "static pause binary to package as registry.k8s.io/pause:3.10")
	busyboxPath := flag.String("busybox", "/bin/busybox", "static busybox binary to package as docker.io/library/busybox:1.36")
	grpcPath := flag.String("grpc-health", "", "static gRPC health server to package as docker.io/nodelet/grpc-health:1.0")
	readyFile := flag.String("ready-file", "", "file written once every image is pushed")
	slowImages := flag.Int("slow-images", 0, "number of distinct busybox images to serve as slow/busybox:1..N")
	slowDelay := flag.Duration("slow-delay", time.Second, "delay of every manifest request under /v2/slow/")
	flag.Parse()

	opts := options{slowImages: *slowImages, slowDelay: *slowDelay}
	if err := run(*addr, *pausePath, *busyboxPath, *grpcPath, *readyFile, opts); err != nil {
		log.Fatalf("testregistry: %v", err)
	}
}

type options struct {
	slowImages int
	slowDelay  time.Duration
}

// slowHandler delays manifest requests of repositories under slow/, once
// active (after the images are pushed).
type slowHandler struct {
	next   http.Handler
	delay  time.Duration
	active atomic.Bool
}

func (h *slowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.active.Load() && h.delay > 0 && strings.HasPrefix(r.URL.Path, "/v2/slow/") && strings.Contains(r.URL.Path, "/manifests/") &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) {
		select {
		case <-time.After(h.delay):
		case <-r.Context().Done():
			return
		}
	}
	h.next.ServeHTTP(w, r)
}

func run(addr, pausePath, busyboxPath, grpcPath, readyFile string, opts options) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to serve on %q: only loopback addresses are allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	slow := &slowHandler{next: registry.New(registry.Logger(log.New(io.Discard, "", 0))), delay: opts.slowDelay}
	srv := &http.Server{
		Handler:           slow,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("testregistry: serve: %v", err)
		}
	}()

	images, err := buildImages(pausePath, busyboxPath, grpcPath, opts.slowImages)
	if err != nil {
		return err
	}
	if err := imagebuild.Push(addr, "testregistry", images); err != nil {
		return err
	}
	slow.active.Store(true)
	if readyFile != "" {
		if err := os.WriteFile(readyFile, []byte(addr+"\n"), 0o644); err != nil {
			return err
		}
	}
	log.Printf("testregistry: serving on %s", addr)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

func buildImages(pausePath, busyboxPath, grpcPath string, slowImages int) ([]imagebuild.Image, error) {
	var out []imagebuild.Image
	if grpcPath != "" {
		bin, err := os.ReadFile(grpcPath)
		if err != nil {
			return nil, err
		}
		img, err := imagebuild.New([]imagebuild.Entry{{Name: "grpc-health", Mode: 0o755, Data: bin}},
			v1.Config{Entrypoint: []string{"/grpc-health"}})
		if err != nil {
			return nil, err
		}
		out = append(out, imagebuild.Image{Tags: []string{"nodelet/grpc-health:1.0"}, Image: img})
	}
	if pausePath != "" {
		bin, err := os.ReadFile(pausePath)
		if err != nil {
			return nil, err
		}
		img, err := imagebuild.New([]imagebuild.Entry{{Name: "pause", Mode: 0o755, Data: bin}},
			v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})
		if err != nil {
			return nil, err
		}
		out = append(out, imagebuild.Image{Tags: []string{"pause:3.10"}, Image: img})
	}
	bb, err := busyboxImage(busyboxPath)
	if err != nil {
		return nil, err
	}
	out = append(out, imagebuild.Image{Tags: []string{"library/busybox:1.36", "library/busybox:latest"}, Image: bb})
	for i := 1; i <= slowImages; i++ {
		// Same layer, own config: a distinct image (digest) per tag.
		cf, err := bb.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Config.Env = append(cf.Config.Env, fmt.Sprintf("SLOW_IMAGE=%d", i))
		img, err := mutate.ConfigFile(bb, cf)
		if err != nil {
			return nil, err
		}
		out = append(out, imagebuild.Image{Tags: []string{fmt.Sprintf("slow/busybox:%d", i)}, Image: img})
	}
	return out, nil
}

func busyboxImage(path string) (v1.Image, error) {
	entries, err := imagebuild.BusyboxEntries(path, imagebuild.Passwd, imagebuild.Group, nil)
	if err != nil {
		return nil, err
	}
	return imagebuild.New(entries, imagebuild.BusyboxConfig())
}
