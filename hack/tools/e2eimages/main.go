// Command e2eimages builds, offline, the images of upstream's e2e test
// suite that the NodeConformance tests pull, and pushes them into the local
// test registry under the paths their real names map to
// (registry.k8s.io/e2e-test-images/agnhost:2.66.1 ->
// <registry>/e2e-test-images/agnhost:2.66.1):
//
//   - busybox 1.37.0-2: Debian's static busybox (1.35) and its applets, with
//     this machine's bash as sh;
//   - pause 3.10.2: the stack's static pause;
//   - agnhost 2.66.1 (also 2.55, the previous one): agnhost built from
//     k8s.io/kubernetes/test/images/agnhost on the busybox userland, with
//     this machine's bash and curl (exec hooks and probe scripts call them),
//     the porter certificates and the image's own user 1000 and group 50000;
//   - kitten and nautilus 1.8: agnhost with their pictures, serving them,
//     and the real images' os-release (Alpine's, their base);
//   - glibc-dns-testing 2.1.1: this machine's dash and glibc hostname on
//     the busybox applets;
//   - nonroot 1.5: busybox as user 1234;
//   - nonewprivs 1.4: busybox with the setuid nnp;
//   - nginx 1.27.0-2 and 1.28.0-2 (with --nginx): Debian's nginx binary (its
//     package extracted, not installed) and its libraries on the busybox
//     userland, serving /usr/share/nginx/html on port 80 in the foreground
//     as the real image (nginx -g "daemon off;").
//
// The images upstream builds from other distributions (perl,
// ipc-utils, volume/*, ...) are not built: their tests
// fail with ErrImagePull, for every agent.
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/hack/tools/imagebuild"
)

func main() {
	registry := flag.String("registry", "127.0.0.1:35000", "loopback registry to push to (plain HTTP)")
	bin := flag.String("bin", "", "directory holding agnhost and nnp built from k8s.io/kubernetes/test/images")
	src := flag.String("k8s-src", "", "k8s.io/kubernetes source (module cache) for the test images' files")
	pause := flag.String("pause", "", "static pause binary")
	busybox := flag.String("busybox", "/bin/busybox", "static busybox binary")
	nginx := flag.String("nginx", "", "Debian's nginx binary (extracted from its package); empty: no nginx image")
	flag.Parse()
	if *bin == "" || *src == "" || *pause == "" {
		log.Fatal("e2eimages: --bin, --k8s-src and --pause are required")
	}
	images, err := build(*bin, *src, *pause, *busybox, *nginx)
	if err != nil {
		log.Fatalf("e2eimages: %v", err)
	}
	if err := imagebuild.Push(*registry, "e2eimages", images); err != nil {
		log.Fatalf("e2eimages: %v", err)
	}
}

func build(bin, src, pause, busybox, nginx string) ([]imagebuild.Image, error) {
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			log.Fatalf("e2eimages: %v", err)
		}
		return data
	}
	bb := func(passwd, group string, skip map[string]bool) []imagebuild.Entry {
		e, err := imagebuild.BusyboxEntries(busybox, passwd, group, skip)
		if err != nil {
			log.Fatalf("e2eimages: %v", err)
		}
		return e
	}
	var out []imagebuild.Image
	add := func(img v1.Image, err error) v1.Image {
		if err != nil {
			log.Fatalf("e2eimages: %v", err)
		}
		return img
	}
	push := func(img v1.Image, tags ...string) { out = append(out, imagebuild.Image{Tags: tags, Image: img}) }
	cfg := imagebuild.BusyboxConfig()

	// sh is this machine's bash: Debian's busybox 1.35 ash drops
	// environment variables whose names are not identifiers ("data-1"),
	// which the real image's busybox 1.37 passes on (a Secrets test reads
	// them through sh -c env).
	withBash := func(entries []imagebuild.Entry, extra ...[2]string) []imagebuild.Entry {
		entries, err := imagebuild.WithHostBinaries(entries, append([][2]string{{"/bin/bash", "/bin/bash"}}, extra...)...)
		if err != nil {
			log.Fatalf("e2eimages: %v", err)
		}
		return append(entries, imagebuild.Entry{Name: "bin/sh", Link: "bash"})
	}
	// The busybox image has every applet in /bin (tests call /bin/sysctl).
	flat, err := imagebuild.FlatBusyboxEntries(busybox, imagebuild.Passwd, imagebuild.Group, map[string]bool{"bin/sh": true})
	if err != nil {
		return nil, err
	}
	push(add(imagebuild.New(withBash(flat), cfg)), "e2e-test-images/busybox:1.37.0-2")
	push(add(imagebuild.New([]imagebuild.Entry{{Name: "pause", Mode: 0o755, Data: read(pause)}},
		v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})), "pause:3.10.2")
	// glibc-dns-testing: Debian bookworm-slim with dnsutils upstream; here
	// this Debian's dash as sh and glibc's hostname (hostname -f resolves
	// through /etc/nsswitch.conf and the pod's /etc/hosts) on the busybox
	// applets (the hostnameOverride tests run sh -c 'hostname; hostname -f').
	glibc, err := imagebuild.FlatBusyboxEntries(busybox, imagebuild.Passwd, imagebuild.Group,
		map[string]bool{"bin/sh": true, "bin/hostname": true})
	if err != nil {
		return nil, err
	}
	if glibc, err = imagebuild.WithHostBinaries(glibc, [2]string{"/bin/dash", "/bin/sh"}, [2]string{"/bin/hostname", "/bin/hostname"}); err != nil {
		return nil, err
	}
	glibc = append(glibc, imagebuild.Entry{Name: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")})
	push(add(imagebuild.New(glibc, cfg)), "e2e-test-images/glibc-dns-testing:2.1.1")

	nonroot := cfg
	nonroot.User = "1234"
	push(add(imagebuild.New(bb(imagebuild.Passwd, imagebuild.Group, nil), nonroot)), "e2e-test-images/nonroot:1.5")
	nnp := append(bb(imagebuild.Passwd, imagebuild.Group, nil),
		imagebuild.Entry{Name: "usr/local/", Mode: 0o755}, imagebuild.Entry{Name: "usr/local/bin/", Mode: 0o755},
		imagebuild.Entry{Name: "usr/local/bin/nnp", Mode: 0o4755, Data: read(filepath.Join(bin, "nnp"))})
	nnpCfg := cfg
	nnpCfg.Cmd = []string{"nnp"}
	push(add(imagebuild.New(nnp, nnpCfg)), "e2e-test-images/nonewprivs:1.4")

	// agnhost: its Dockerfile's alpine with bash and curl, the users.
	passwd := imagebuild.Passwd + "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
	group := imagebuild.Group + "user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"
	// bash as sh (see above), curl, and OpenBSD's nc (busybox's has no -u),
	// as the real image's alpine packages.
	entries := withBash(bb(passwd, group, map[string]bool{"bin/sh": true, "usr/bin/nc": true}),
		[2]string{"/usr/bin/curl", "/usr/bin/curl"}, [2]string{"/bin/nc.openbsd", "/usr/bin/nc"})
	porter := filepath.Join(src, "test/images/agnhost/porter")
	entries = append(entries,
		imagebuild.Entry{Name: "home/user-defined-in-image/", Mode: 0o755, UID: 1000, GID: 1000},
		imagebuild.Entry{Name: "uploads/", Mode: 0o755},
		imagebuild.Entry{Name: "localhost.crt", Mode: 0o644, Data: read(filepath.Join(porter, "localhost.crt"))},
		imagebuild.Entry{Name: "localhost.key", Mode: 0o644, Data: read(filepath.Join(porter, "localhost.key"))},
		imagebuild.Entry{Name: "agnhost", Mode: 0o755, Data: read(filepath.Join(bin, "agnhost"))},
		imagebuild.Entry{Name: "agnhost-2", Link: "agnhost"},
	)
	agnCfg := cfg
	agnCfg.Entrypoint, agnCfg.Cmd = []string{"/agnhost"}, []string{"pause"}
	agnhost := add(imagebuild.New(entries, agnCfg))
	push(agnhost, "e2e-test-images/agnhost:2.66.1", "e2e-test-images/agnhost:2.55")
	for _, pic := range []string{"kitten", "nautilus"} {
		html := filepath.Join(src, "test/images", pic, "html")
		webCfg := agnCfg
		webCfg.Cmd = []string{"test-webserver"}
		push(add(imagebuild.Append(agnhost, []imagebuild.Entry{
			{Name: pic + ".jpg", Mode: 0o644, Data: read(filepath.Join(html, pic+".jpg"))},
			{Name: "data.json", Mode: 0o644, Data: read(filepath.Join(html, "data.json"))},
			// The real images are agnhost on alpine:3.21: upstream's
			// ImageVolume tests read the os-release of kitten mounted as
			// a volume.
			{Name: "etc/os-release", Mode: 0o644, Data: []byte(alpineOSRelease)},
		}, webCfg)), "e2e-test-images/"+pic+":1.8")
	}
	if nginx != "" {
		ngx, err := imagebuild.WithHostBinaries(bb(imagebuild.Passwd, imagebuild.Group, nil), [2]string{nginx, "/usr/sbin/nginx"})
		if err != nil {
			return nil, err
		}
		for _, d := range []string{"etc/nginx/", "run/", "var/", "var/lock/", "var/log/", "var/log/nginx/", "var/lib/", "var/lib/nginx/",
			"usr/share/", "usr/share/nginx/", "usr/share/nginx/html/"} {
			ngx = append(ngx, imagebuild.Entry{Name: d, Mode: 0o755})
		}
		ngx = append(ngx,
			imagebuild.Entry{Name: "etc/nginx/nginx.conf", Mode: 0o644, Data: []byte(nginxConf)},
			imagebuild.Entry{Name: "usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte(nginxIndex)},
		)
		ngxCfg := cfg
		ngxCfg.Cmd = []string{"nginx", "-g", "daemon off;"}
		ngxCfg.ExposedPorts = map[string]struct{}{"80/tcp": {}}
		ngxCfg.StopSignal = "SIGQUIT"
		push(add(imagebuild.New(ngx, ngxCfg)), "e2e-test-images/nginx:1.27.0-2", "e2e-test-images/nginx:1.28.0-2")
	}
	return out, nil
}

// nginxConf serves the default page on port 80, logging to the
// container's stdout and stderr, as the real image's configuration.
const nginxConf = `user root;
worker_processes 1;
error_log stderr notice;
pid /run/nginx.pid;
events { worker_connections 1024; }
http {
    access_log /dev/stdout;
    default_type text/html;
    server {
        listen 80;
        root /usr/share/nginx/html;
        index index.html;
    }
}
`

const nginxIndex = `<!DOCTYPE html>
<html><head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1></body></html>
`

// alpineOSRelease is the /etc/os-release of the real kitten and nautilus
// images (their base, alpine:3.21).
const alpineOSRelease = `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.21
PRETTY_NAME="Alpine Linux v3.21"
HOME_URL="https://alpinelinux.org/"
BUG_REPORT_URL="https://gitlab.alpinelinux.org/alpine/aports/-/issues"
`
