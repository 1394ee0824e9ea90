#!/usr/bin/env bash
# Builds runc from the Go module proxy (cgo, seccomp through Debian's
# libseccomp-dev), for the stack's containerd 2 and the test bed's guest.
# Cached in .cache/runc/<version>/bin (git-ignored); a warm run takes no
# time. Prints the path of the runc binary.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v go >/dev/null || die "go is not installed (expected at /usr/local/go/bin)"

RUNC_DIR="$REPO_ROOT/.cache/runc/$RUNC_VERSION"
if [ ! -x "$RUNC_DIR/bin/runc" ]; then
	pkg-config --exists libseccomp 2>/dev/null || die "runc needs libseccomp-dev and pkg-config (make stack-up installs them)"
	mkdir -p "$RUNC_DIR/wrapper" "$RUNC_DIR/bin"
	cat >"$RUNC_DIR/wrapper/go.mod" <<MOD
module nodelet.local/runc-wrapper

go 1.26

require github.com/opencontainers/runc $RUNC_VERSION
MOD
	printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/opencontainers/runc"\n' >"$RUNC_DIR/wrapper/tools.go"
	log "building runc $RUNC_VERSION from the Go module proxy (cgo, seccomp)"
	(cd "$RUNC_DIR/wrapper" && GOFLAGS=-mod=mod go mod tidy) >&2 || die "resolving runc $RUNC_VERSION failed"
	# Upstream's tags without libpathrs (a Rust library Debian 12 lacks: runc
	# then uses its pure-Go pathrs-lite).
	(cd "$RUNC_DIR/wrapper" && CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" \
		-ldflags "-X main.gitCommit=module-proxy-$RUNC_VERSION" -o "$RUNC_DIR/bin/runc.tmp" github.com/opencontainers/runc) >&2 ||
		die "building runc $RUNC_VERSION failed"
	mv "$RUNC_DIR/bin/runc.tmp" "$RUNC_DIR/bin/runc"
fi
echo "$RUNC_DIR/bin/runc"
