package cgroups

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// CgroupName is a cgroup as the components of its path below the
// hierarchy's root, whatever the driver: {"kubepods", "burstable",
// "pod<uid>"}. The empty name is the root.
type CgroupName []string

// NewCgroupName returns base with components appended (a new slice).
func NewCgroupName(base CgroupName, components ...string) CgroupName {
	return append(append(CgroupName{}, base...), components...)
}

// ParseCgroupfsName splits a cgroupfs path ("/a/b") into a name; "" and "/"
// are the root.
func ParseCgroupfsName(path string) CgroupName {
	var out CgroupName
	for _, p := range strings.Split(path, "/") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ToCgroupfs is the name as the cgroupfs driver spells it:
// "/kubepods/burstable/pod<uid>".
func (n CgroupName) ToCgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// ToSystemd is the name as the systemd driver spells it, as upstream: each
// level a slice named after all the levels above it, "-" in components
// replaced by "_": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice".
func (n CgroupName) ToSystemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for i, part := range n {
		part = strings.ReplaceAll(strings.TrimSuffix(part, ".slice"), "-", "_")
		if i > 0 {
			prefix += "-"
		}
		prefix += part
		b.WriteString("/" + prefix + ".slice")
	}
	return b.String()
}

// SystemdUnit is the last slice of ToSystemd ("kubepods-burstable-pod<uid_>.slice").
func (n CgroupName) SystemdUnit() string {
	s := n.ToSystemd()
	return s[strings.LastIndex(s, "/")+1:]
}

// PodUIDFromDir is the pod UID a pod cgroup's directory name carries, as
// either driver names it: pod<uid> (cgroupfs) or <parent
// slices>-pod<uid, - as _>.slice (systemd).
func PodUIDFromDir(name string) (types.UID, bool) {
	if base, ok := strings.CutSuffix(name, ".slice"); ok {
		i := strings.LastIndex(base, "-"+podCgroupPrefix)
		if i < 0 {
			return "", false
		}
		uid := base[i+1+len(podCgroupPrefix):]
		return types.UID(strings.ReplaceAll(uid, "_", "-")), uid != ""
	}
	uid, ok := strings.CutPrefix(name, podCgroupPrefix)
	if !ok || uid == "" || strings.ContainsAny(uid, "./") {
		return "", false
	}
	return types.UID(uid), true
}
