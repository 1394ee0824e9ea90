// Package imagebuild builds small OCI images from files on this machine,
// offline: one layer of entries (files, directories, symlinks) and a config.
// The harness's registries (testregistry) and the conformance images
// (e2eimages) are built with it.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entry is one entry of a layer: a directory (Name ends in "/"), a symlink
// (Link set) or a regular file (Data).
type Entry struct {
	Name     string
	Mode     int64
	Data     []byte
	Link     string // symlink target, if any
	UID, GID int
}

// Layer returns a layer of the entries, in order, with the epoch as time.
func Layer(entries []Entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, ModTime: epoch, Format: tar.FormatPAX, Uid: e.UID, Gid: e.GID}
		switch {
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Link, 0o777
		case strings.HasSuffix(e.Name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
}

// New returns an image of one layer of the entries and the config.
func New(entries []Entry, cfg v1.Config) (v1.Image, error) {
	return Append(empty.Image, entries, cfg)
}

// Append returns base with a layer of the entries on top and cfg as its
// config (the base's config is replaced).
func Append(base v1.Image, entries []Entry, cfg v1.Config) (v1.Image, error) {
	layer, err := Layer(entries)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// Passwd and Group are the busybox userland's /etc/passwd and /etc/group.
const (
	Passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
	Group  = "root:x:0:\nnogroup:x:65534:\n"
)

// BusyboxEntries is a busybox userland from a static busybox binary: the
// binary, a symlink per applet (except those in skip) where busybox
// installs it (/bin, /sbin, /usr/bin, /usr/sbin), /etc/passwd and
// /etc/group (passwd and group), /tmp with 1777.
func BusyboxEntries(path, passwd, group string, skip map[string]bool) ([]Entry, error) {
	return busyboxEntries(path, passwd, group, skip, false)
}

// FlatBusyboxEntries is BusyboxEntries with every applet in /bin, as the
// busybox image (docker.io/library/busybox) has them.
func FlatBusyboxEntries(path, passwd, group string, skip map[string]bool) ([]Entry, error) {
	return busyboxEntries(path, passwd, group, skip, true)
}

func busyboxEntries(path, passwd, group string, skip map[string]bool, flat bool) ([]Entry, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	list, err := exec.Command(path, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", path, err)
	}
	entries := []Entry{
		{Name: "bin/", Mode: 0o755},
		{Name: "bin/busybox", Mode: 0o755, Data: bin},
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Name: "etc/group", Mode: 0o644, Data: []byte(group)},
		{Name: "root/", Mode: 0o700},
		{Name: "tmp/", Mode: 0o1777},
		{Name: "home/", Mode: 0o755},
		{Name: "usr/", Mode: 0o755},
		{Name: "usr/bin/", Mode: 0o755},
		{Name: "usr/sbin/", Mode: 0o755},
		{Name: "sbin/", Mode: 0o755},
		{Name: "var/", Mode: 0o755},
	}
	var links []string
	for _, l := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		l = strings.TrimSpace(l)
		if flat {
			l = "bin/" + filepath.Base(l)
		}
		if l == "" || l == "bin/busybox" || skip[l] {
			continue
		}
		links = append(links, l)
	}
	sort.Strings(links)
	links = slices.Compact(links)
	for _, l := range links {
		entries = append(entries, Entry{Name: l, Link: "/bin/busybox"})
	}
	return entries, nil
}

// BusyboxConfig is the config of a busybox image: sh, the usual PATH.
func BusyboxConfig() v1.Config {
	return v1.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	}
}

// HostBinary returns entries for a dynamically linked binary of this
// machine at dst (a path in the image), with the shared libraries ldd
// lists at their own paths; have holds the paths already given (each
// library is added once), and the directories they need are added too.
func HostBinary(src, dst string, have map[string]bool) ([]Entry, error) {
	out, err := exec.Command("ldd", src).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", src, err)
	}
	var dirs []string
	var files []Entry
	add := func(from, to string, mode int64) error {
		to = strings.TrimPrefix(to, "/")
		if have[to] {
			return nil
		}
		data, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		for d := filepath.Dir(to); d != "." && d != "/"; d = filepath.Dir(d) {
			if !have[d+"/"] {
				have[d+"/"] = true
				dirs = append(dirs, d+"/")
			}
		}
		have[to] = true
		files = append(files, Entry{Name: to, Mode: mode, Data: data})
		return nil
	}
	for _, line := range strings.Split(string(out), "\n") {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x...)".
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		if err := add(lib, lib, 0o755); err != nil {
			return nil, err
		}
	}
	if err := add(src, dst, 0o755); err != nil {
		return nil, err
	}
	// Directories first, each after its parent.
	sort.Strings(dirs)
	entries := make([]Entry, 0, len(dirs)+len(files))
	for _, d := range dirs {
		entries = append(entries, Entry{Name: d, Mode: 0o755})
	}
	return append(entries, files...), nil
}

// Image is an image and the repository:tag paths it is pushed as.
type Image struct {
	Tags  []string
	Image v1.Image
}

// Push writes every image under each of its tags to the plain-HTTP
// registry at addr, logging each with prefix.
func Push(addr, prefix string, images []Image) error {
	for _, img := range images {
		for _, tag := range img.Tags {
			ref, err := name.ParseReference(addr+"/"+tag, name.Insecure)
			if err != nil {
				return err
			}
			if err := remote.Write(ref, img.Image); err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			log.Printf("%s: pushed %s", prefix, ref)
		}
	}
	return nil
}

// WithHostBinaries is entries with this machine's binaries (src, dst pairs)
// and their libraries added, each path once.
func WithHostBinaries(entries []Entry, bins ...[2]string) ([]Entry, error) {
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name] = true
	}
	for _, b := range bins {
		e, err := HostBinary(b[0], b[1], have)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e...)
	}
	return entries, nil
}
