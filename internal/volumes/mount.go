package volumes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// ensureTmpfs mounts a tmpfs on dir, with extra mount options, unless one
// is there already; it reports whether it mounted one.
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
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return false, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return true, nil
}

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	mounted, err := mountPoints(dir)
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

// mountPoints lists the mount points at or below dir.
func mountPoints(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescape(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
