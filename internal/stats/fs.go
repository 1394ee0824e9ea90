package stats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// fsInfo is what statfs tells about a filesystem.
type fsInfo struct {
	capacity, available, used uint64
	inodes, inodesFree        uint64
}

func statfs(path string) (fsInfo, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return fsInfo{}, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bsize := uint64(st.Bsize)
	return fsInfo{
		capacity:   st.Blocks * bsize,
		available:  st.Bavail * bsize,
		used:       (st.Blocks - st.Bfree) * bsize,
		inodes:     st.Files,
		inodesFree: st.Ffree,
	}, nil
}

// fsStats is the FsStats of a whole filesystem, used included.
func (i fsInfo) fsStats(t time.Time) *statsv1alpha1.FsStats {
	s := i.base(t)
	s.UsedBytes = ptr(i.used)
	if i.inodes >= i.inodesFree {
		s.InodesUsed = ptr(i.inodes - i.inodesFree)
	}
	return s
}

// base is the FsStats of something living on the filesystem: capacity and
// availability of the filesystem, usage left to the caller.
func (i fsInfo) base(t time.Time) *statsv1alpha1.FsStats {
	return &statsv1alpha1.FsStats{
		Time:           metav1.NewTime(t),
		AvailableBytes: ptr(i.available),
		CapacityBytes:  ptr(i.capacity),
		Inodes:         ptr(i.inodes),
		InodesFree:     ptr(i.inodesFree),
	}
}

// usage is the disk space and inodes used by a tree.
type usage struct {
	bytes, inodes uint64
}

// diskUsage is fsutil.DiskUsage as a usage.
func diskUsage(path string) (usage, error) {
	u, err := fsutil.DiskUsage(path)
	return usage{bytes: u.Bytes, inodes: u.Inodes}, err
}

// filesUsage adds up the regular files directly in dir (not in its
// subdirectories), as upstream measures log directories.
func filesUsage(dir string) (usage, error) {
	var u usage
	ents, err := os.ReadDir(dir)
	if err != nil {
		return u, err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			u.bytes += uint64(st.Blocks) * 512
		}
		u.inodes++
	}
	return u, nil
}

// volumeCacheTTL is how long a volume's du result is reused. Upstream
// measures volumes every volumeStatsAggPeriod (1m) in the background.
// (Config.VolumeStatsAggPeriod sets it).
const volumeCacheTTL = time.Minute

type volumeEntry struct {
	mu       sync.Mutex // held while measuring
	u        usage
	at       time.Time // when u was measured; zero: never
	lastUsed time.Time
}

// volumeCache keeps per-path du results for volumeCacheTTL. Entries not
// asked for during 2*volumeCacheTTL are dropped.
type volumeCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*volumeEntry
}

func newVolumeCache(ttl time.Duration) *volumeCache {
	return &volumeCache{ttl: ttl, m: make(map[string]*volumeEntry)}
}

// get returns the usage of path, measured at most volumeCacheTTL before now,
// and when it was measured. Concurrent callers for one path share one walk.
func (c *volumeCache) get(path string, now time.Time, du func(string) (usage, error)) (usage, time.Time, error) {
	c.mu.Lock()
	e := c.m[path]
	if e == nil {
		e = &volumeEntry{}
		c.m[path] = e
	}
	e.lastUsed = now
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.at.IsZero() && now.Sub(e.at) < c.ttl && !now.Before(e.at) {
		return e.u, e.at, nil
	}
	u, err := du(path)
	if err != nil {
		return usage{}, time.Time{}, err
	}
	e.u, e.at = u, now
	return u, now, nil
}

// prune drops the entries nobody asked for since 2*volumeCacheTTL.
func (c *volumeCache) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if now.Sub(e.lastUsed) > 2*c.ttl {
			delete(c.m, k)
		}
	}
}

func (c *volumeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func ptr[T any](v T) *T { return &v }

// DedicatedImageFs reports whether the runtime's image filesystem is
// another filesystem than the root directory's (upstream asks cadvisor the
// same): the eviction signals of nodefs and imagefs then count different
// things.
func (p *Provider) DedicatedImageFs(ctx context.Context) (bool, error) {
	if p.cfg.Images == nil || p.cfg.RootDir == "" {
		return false, nil
	}
	resp, err := p.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		return false, fmt.Errorf("image filesystem info: %w", err)
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return false, nil
	}
	dev := func(path string) (uint64, error) {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return 0, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		return uint64(st.Dev), nil
	}
	root, err := dev(p.cfg.RootDir)
	if err != nil {
		return false, err
	}
	images, err := dev(fss[0].GetFsId().GetMountpoint())
	if err != nil {
		return false, err
	}
	return root != images, nil
}

// ImageFsCapacity is the capacity of the runtime's image filesystem and
// what is available on it (statfs of the mount point the runtime reports).
func (p *Provider) ImageFsCapacity(ctx context.Context) (capacity, available int64, err error) {
	if p.cfg.Images == nil {
		return 0, 0, errors.New("no image service")
	}
	resp, err := p.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("image filesystem info: %w", err)
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, errors.New("the runtime reports no image filesystem")
	}
	fi, err := statfs(fss[0].GetFsId().GetMountpoint())
	if err != nil {
		return 0, 0, err
	}
	return int64(fi.capacity), int64(fi.available), nil
}
