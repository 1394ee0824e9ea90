package stats

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func blocks(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Blocks) * 512
}

func TestDiskUsage(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a":         strings.Repeat("x", 10000),
		"sub/b":     strings.Repeat("y", 70000),
		"sub/sub/c": "",
	})
	if err := os.Link(filepath.Join(root, "a"), filepath.Join(root, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(root, "sym")); err != nil {
		t.Fatal(err)
	}

	u, err := diskUsage(root)
	if err != nil {
		t.Fatal(err)
	}
	// root, a, sub, sub/b, sub/sub, sub/sub/c, sym; a-link is a's inode.
	if u.inodes != 7 {
		t.Errorf("inodes = %d, want 7", u.inodes)
	}
	var want uint64
	for _, p := range []string{".", "a", "sub", "sub/b", "sub/sub", "sub/sub/c", "sym"} {
		want += blocks(t, filepath.Join(root, p))
	}
	if u.bytes != want {
		t.Errorf("bytes = %d, want %d", u.bytes, want)
	}
	if u.bytes < 80000 {
		t.Errorf("bytes = %d, less than the data written", u.bytes)
	}

	// An independent oracle: du -sx in bytes, where available.
	if out, err := exec.Command("du", "-sx", "--block-size=1", root).Output(); err == nil {
		f := strings.Fields(string(out))
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil && n != u.bytes {
			t.Errorf("bytes = %d, du says %d", u.bytes, n)
		}
	}

	if _, err := diskUsage(filepath.Join(root, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: err = %v, want ErrNotExist", err)
	}
}

func TestFilesUsage(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"0.log":                 strings.Repeat("l", 5000),
		"0.log.20240101-000000": strings.Repeat("r", 9000),
		"nested/1.log":          strings.Repeat("n", 50000), // not counted
	})
	u, err := filesUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := blocks(t, filepath.Join(dir, "0.log")) + blocks(t, filepath.Join(dir, "0.log.20240101-000000"))
	if u.inodes != 2 || u.bytes != want {
		t.Errorf("usage = %+v, want 2 inodes, %d bytes", u, want)
	}
	if _, err := filesUsage(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing dir must be an error")
	}
}

func TestVolumeCache(t *testing.T) {
	c := newVolumeCache(volumeCacheTTL)
	var walks atomic.Int32
	du := func(path string) (usage, error) {
		walks.Add(1)
		if path == "bad" {
			return usage{}, errors.New("boom")
		}
		return usage{bytes: uint64(walks.Load()), inodes: 1}, nil
	}
	t0 := time.Unix(1000, 0)

	for _, tc := range []struct {
		name      string
		path      string
		now       time.Time
		wantBytes uint64
		wantAt    time.Time
		wantWalks int32
		wantErr   bool
	}{
		{"first measure", "v", t0, 1, t0, 1, false},
		{"cached", "v", t0.Add(30 * time.Second), 1, t0, 1, false},
		{"stale", "v", t0.Add(volumeCacheTTL), 2, t0.Add(volumeCacheTTL), 2, false},
		{"clock went back", "v", t0, 3, t0, 3, false},
		{"error is not cached", "bad", t0, 0, time.Time{}, 4, true},
		{"error again", "bad", t0, 0, time.Time{}, 5, true},
	} {
		u, at, err := c.get(tc.path, tc.now, du)
		if (err != nil) != tc.wantErr || u.bytes != tc.wantBytes || !at.Equal(tc.wantAt) || walks.Load() != tc.wantWalks {
			t.Errorf("%s: got (%+v, %v, %v) after %d walks, want %d bytes at %v after %d walks",
				tc.name, u, at, err, walks.Load(), tc.wantBytes, tc.wantAt, tc.wantWalks)
		}
	}

	// Concurrent callers of one stale path share one walk.
	var wg sync.WaitGroup
	before := walks.Load()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.get("w", t0, du); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := walks.Load() - before; n != 1 {
		t.Errorf("%d walks for concurrent callers, want 1", n)
	}

	// Entries nobody asks for go away.
	if c.len() != 3 {
		t.Fatalf("len = %d, want 3", c.len())
	}
	c.get("v", t0.Add(5*time.Minute), du)
	c.prune(t0.Add(5 * time.Minute))
	if c.len() != 1 {
		t.Errorf("after prune len = %d, want 1", c.len())
	}
}

func TestStatfs(t *testing.T) {
	fi, err := statfs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fi.capacity == 0 || fi.available > fi.capacity || fi.used > fi.capacity {
		t.Errorf("implausible statfs: %+v", fi)
	}
	if _, err := statfs(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing path must be an error")
	}
}

// DedicatedImageFs compares the devices of the root directory and the
// image filesystem's mount point; ImageFsCapacity is the latter's statfs.
func TestImageFs(t *testing.T) {
	root := t.TempDir()
	images := func(mp string) *fakeImages {
		return &fakeImages{resp: &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mp}}}}}
	}
	for _, tc := range []struct {
		name, mountpoint string
		want             bool
	}{{"same filesystem", t.TempDir(), false}, {"another filesystem", "/proc", true}} {
		p, err := New(Config{Runtime: &fakeRuntime{}, Images: images(tc.mountpoint), RootDir: root})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.DedicatedImageFs(context.Background()); err != nil || got != tc.want {
			t.Errorf("%s: dedicated %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	p, err := New(Config{Runtime: &fakeRuntime{}, Images: images(root), RootDir: root})
	if err != nil {
		t.Fatal(err)
	}
	capacity, available, err := p.ImageFsCapacity(context.Background())
	if err != nil || capacity <= 0 || available <= 0 || available > capacity {
		t.Errorf("capacity %d available %d: %v", capacity, available, err)
	}
	p, err = New(Config{Runtime: &fakeRuntime{}, Images: &fakeImages{resp: &runtimeapi.ImageFsInfoResponse{}}, RootDir: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.ImageFsCapacity(context.Background()); err == nil {
		t.Error("no error without an image filesystem")
	}
}
