package fsutil

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// MountPoints lists the mount points at or below dir (dir "" : all), from
// /proc/self/mountinfo.
func MountPoints(dir string) ([]string, error) {
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
		mp := Unescape(fields[4])
		if dir == "" || mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// IsMounted reports whether something is mounted exactly on path, from the
// mount table: a bind mount of a directory of the same file system does
// not change the device, so comparing devices would miss it.
func IsMounted(path string) (bool, error) {
	clean := filepath.Clean(path)
	mps, err := MountPoints(clean)
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == clean {
			return true, nil
		}
	}
	return false, nil
}

// Unescape undoes mountinfo's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && octal(s[i+1]) && octal(s[i+2]) && octal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(c byte) bool { return c >= '0' && c <= '7' }

// MountSource is the source (a device such as /dev/vda1, or what a virtual
// file system names itself) of the mount that holds path: the mount point
// that is the longest prefix of path in /proc/self/mountinfo, the last
// mounted one when several are stacked there.
func MountSource(path string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	clean := filepath.Clean(path)
	best, source := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		mp := Unescape(fields[4])
		if (clean == mp || mp == "/" || strings.HasPrefix(clean, mp+"/")) && len(mp) >= len(best) {
			best, source = mp, Unescape(tail[1])
		}
	}
	return source, sc.Err()
}
