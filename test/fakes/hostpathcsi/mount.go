package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// run runs a command, its output in the error.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// makeImage creates a sparse image of size bytes with a file system: ext4,
// or xfs (which grows online without CAP_SYS_RESOURCE, unlike ext4).
func makeImage(path string, size int64, fs string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if fs == "xfs" {
		_, err = run("mkfs.xfs", "-q", path)
	} else {
		_, err = run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", path)
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// attachLoop attaches an image to a free loop device.
func attachLoop(image string) (string, error) {
	return run("losetup", "--find", "--show", image)
}

func detachLoop(dev string) error {
	if dev == "" {
		return nil
	}
	_, err := run("losetup", "-d", dev)
	return err
}

// mountPoint reports whether something is mounted on path.
func mountPoint(path string) (bool, error) { return fsutil.IsMounted(path) }

// bindMount bind-mounts src on target, read-only if asked (a bind mount
// takes read-only only on a remount).
func bindMount(src, target string, readOnly bool, options []string) error {
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s on %s: %w", src, target, err)
	}
	flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT)
	remount := readOnly
	for _, o := range options {
		switch o {
		case "ro":
			readOnly, remount = true, true
		case "nosuid":
			flags |= syscall.MS_NOSUID
			remount = true
		case "nodev":
			flags |= syscall.MS_NODEV
			remount = true
		case "noexec":
			flags |= syscall.MS_NOEXEC
			remount = true
		}
	}
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if remount {
		if err := syscall.Mount("", target, "", flags, ""); err != nil {
			_ = syscall.Unmount(target, 0)
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// mountFS mounts the file system (fs) on dev at target.
func mountFS(dev, fs, target string, readOnly bool) error {
	var flags uintptr
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if fs == "" {
		fs = "ext4"
	}
	if err := syscall.Mount(dev, target, fs, flags, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, target, err)
	}
	return nil
}

// unmount unmounts target if it is a mount point.
func unmount(target string) error {
	mounted, err := mountPoint(target)
	if err != nil || !mounted {
		return err
	}
	if err := syscall.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// removePath removes a target directory or file, fine if it is gone.
func removePath(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ensureFile makes p an (empty) file, for a block device's bind mount.
func ensureFile(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
