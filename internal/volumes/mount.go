package volumes

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/fsutil"
	"github.com/nodelet/nodelet/internal/machine"
)

// tmpfsNoswap tells whether tmpfs takes the noswap option, once, as
// upstream's IsTmpfsNoswapOptionSupported: see
// machine.TmpfsNoswapSupported.
var tmpfsNoswap = sync.OnceValue(func() bool { return machine.TmpfsNoswapSupported("/proc") })

// tmpfsOptions are a memory-backed volume's mount options: opts, and
// noswap when supported, as upstream's generateTmpfsMountOptions (the
// volume's pages never go to swap, whether swap is on or not).
func tmpfsOptions(opts string, noswap bool) string {
	if !noswap {
		return opts
	}
	if opts == "" {
		return "noswap"
	}
	return opts + ",noswap"
}

// ensureTmpfs mounts a tmpfs on dir, with extra mount options (and noswap
// where the kernel has it), unless one is there already; it reports
// whether it mounted one.
func ensureTmpfs(dir, opts string) (bool, error) {
	// Checked on every sync of every pod: a stat of the directory and its
	// parent, not a read of the whole mount table (which grows with the
	// pods: it was a third of nodelet's CPU in a 100-pod burst).
	mounted, err := isMountPoint(dir)
	if err != nil {
		return false, err
	}
	if mounted {
		return false, nil
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, tmpfsOptions(opts, tmpfsNoswap())); err != nil {
		return false, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return true, nil
}

// ensureHugetlbfs mounts a hugetlbfs of the pod's huge page size on dir
// unless one is mounted; it reports whether it mounted it.
func ensureHugetlbfs(dir string, medium v1.StorageMedium, pod *v1.Pod) (bool, error) {
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return false, err
	}
	opt, err := pageSizeOption(medium, pod)
	if err != nil {
		return false, err
	}
	if err := syscall.Mount("nodev", dir, "hugetlbfs", 0, opt); err != nil {
		return false, fmt.Errorf("mount hugetlbfs (%s) on %s: %w", opt, dir, err)
	}
	return true, nil
}

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	mounted, err := fsutil.MountPoints(dir)
	if err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounted)))
	for _, m := range mounted {
		if err := syscall.Unmount(m, 0); err != nil {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", m, err)
			}
		}
	}
	return nil
}

// isMountPoint reports whether something is mounted on dir: it then sits
// on another device than its parent directory.
func isMountPoint(dir string) (bool, error) {
	var st, parent syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := syscall.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}
