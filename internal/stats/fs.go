package stats

import (
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
	mu sync.Mutex
	m  map[string]*volumeEntry
}

func newVolumeCache() *volumeCache {
	return &volumeCache{m: make(map[string]*volumeEntry)}
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
	if !e.at.IsZero() && now.Sub(e.at) < volumeCacheTTL && !now.Before(e.at) {
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
		if now.Sub(e.lastUsed) > 2*volumeCacheTTL {
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
