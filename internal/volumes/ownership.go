package volumes

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Permission bits fsGroup adds, as upstream's SetVolumeOwnership: group
// read-write (read-only for volumes a container cannot write: configMap,
// secret, downwardAPI, projected), plus group search and setgid on
// directories so that new files inherit the group.
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// SetVolumeOwnership gives everything under dir the group fsGroup and the
// group permissions above, as upstream's SetVolumeOwnership: group changed
// with lchown (symlinks' own group; their mode is left alone: a chmod would
// reach their target), mode | rw (or ro) mask, and | setgid | group search
// on directories. With policy OnRootMismatch nothing is walked when dir
// already has the group, the permissions and setgid (its content is assumed
// right). Nothing happens without an fsGroup.
func SetVolumeOwnership(ctx context.Context, dir string, fsGroup *int64, policy *v1.PodFSGroupChangePolicy, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch && !needsOwnershipChange(dir, *fsGroup, readOnly) {
		logger.V(4).Info("Volume root has the fsGroup already; not walking it (OnRootMismatch)", "dir", dir)
		return nil
	}
	start := time.Now()
	defer func() {
		if took := time.Since(start); took > 30*time.Second {
			logger.Info("Setting the fsGroup of a volume took long", "dir", dir, "took", took.Round(time.Second))
		}
	}()
	gid := int(*fsGroup)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return changeFilePermission(p, gid, readOnly, info)
	})
}

func changeFilePermission(p string, gid int, readOnly bool, info os.FileInfo) error {
	if err := os.Lchown(p, -1, gid); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	if info.IsDir() {
		mask |= os.ModeSetgid | execMask
	}
	// info.Mode() keeps setuid/setgid/sticky; os.Chmod maps them.
	return os.Chmod(p, info.Mode()|mask)
}

// needsOwnershipChange is upstream's requiresPermissionChange: false when
// dir is a directory with group fsGroup, setgid, and at least the group
// permissions SetVolumeOwnership gives.
func needsOwnershipChange(dir string, fsGroup int64, readOnly bool) bool {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != fsGroup {
		return true
	}
	want := rwMask | execMask
	if readOnly {
		want = roMask | execMask
	}
	return fi.Mode().Perm()&want != want || fi.Mode()&os.ModeSetgid == 0
}
