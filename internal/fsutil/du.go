package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Usage is the disk space (allocated blocks, in bytes) and the inodes a
// tree uses.
type Usage struct {
	Bytes, Inodes uint64
}

// DiskUsage walks path as `du -sx` does: bytes are allocated blocks, inodes
// are counted once however many links they have, and other filesystems
// mounted below path are not entered. Entries that vanish during the walk
// are skipped.
func DiskUsage(path string) (Usage, error) {
	var u Usage
	root, err := os.Lstat(path)
	if err != nil {
		return u, err
	}
	rootSt, ok := root.Sys().(*syscall.Stat_t)
	if !ok {
		return u, errors.New("no stat_t")
	}
	seen := make(map[uint64]struct{})
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Dev != rootSt.Dev {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if _, dup := seen[st.Ino]; dup {
			return nil
		}
		seen[st.Ino] = struct{}{}
		u.Inodes++
		u.Bytes += uint64(st.Blocks) * 512
		return nil
	})
	return u, err
}
