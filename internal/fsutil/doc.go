// Package fsutil owns the filesystem measurements other packages share:
// how much a directory tree takes on disk, the way `du -sx` counts it.
package fsutil
