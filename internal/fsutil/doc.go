// Package fsutil owns the filesystem facts other packages share: how much
// a directory tree takes on disk, the way `du -sx` counts it, and what the
// mount table (/proc/self/mountinfo) has at or below a path, and how a
// checkpoint file is replaced whole (WriteFileAtomic).
package fsutil
