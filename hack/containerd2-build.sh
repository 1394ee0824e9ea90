#!/usr/bin/env bash
# Builds containerd v2 and its runc shim from the Go module proxy, for the
# tests of the CRI event stream (GetContainerEvents), which the Debian
# containerd 1.6 of the stack lacks. Cached in .cache/containerd/<version>/bin
# (git-ignored). Cold on 2 cores: a few minutes; warm: seconds. Prints the
# directory holding containerd and containerd-shim-runc-v2.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION="$CONTAINERD2_VERSION"
CACHE="${CONTAINERD2_CACHE_DIR:-$REPO_ROOT/.cache/containerd}/$VERSION"
BIN="$CACHE/bin"
if [ -x "$BIN/containerd" ] && [ -x "$BIN/containerd-shim-runc-v2" ]; then
	echo "$BIN"
	exit 0
fi
command -v go >/dev/null || die "go is not installed"
mkdir -p "$CACHE/wrapper" "$BIN"
cd "$CACHE/wrapper"
cat >go.mod <<MOD
module nodelet.local/containerd-wrapper

go 1.26

require github.com/containerd/containerd/v2 $VERSION
MOD
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
GO
log "building containerd $VERSION from the Go module proxy"
GOFLAGS=-mod=mod go mod tidy >&2 || die "resolving containerd $VERSION failed"
# Static, without the snapshotters that need C libraries.
CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -o "$BIN/" \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 >&2 || die "building containerd $VERSION failed"
echo "$BIN"
