#!/usr/bin/env bash
# The container runtime the test bed's guest runs, built on the host from the
# Go module proxy (the guest is Debian 12 like the host, so cgo binaries link
# against the same glibc and libseccomp2):
#   containerd v2 + containerd-shim-runc-v2  hack/containerd2-build.sh (.cache/containerd/<version>, or CONTAINERD2_CACHE_DIR)
#   ctr                                       the same module, .cache/ctr/<version>
#   runc                                      github.com/opencontainers/runc, cgo with Debian's libseccomp-dev
#                                             (tags seccomp urfave_cli_no_docs), .cache/runc/<version>
#   crictl                                    sigs.k8s.io/cri-tools, .cache/crictl/<version>
# Each is cached; a warm run takes no time. Prints NAME=PATH lines.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v go >/dev/null || die "go is not installed (expected at /usr/local/go/bin)"

VM_CONTAINERD_BIN=$(CONTAINERD2_VERSION="$VM_CONTAINERD_VERSION" bash "$REPO_ROOT/hack/containerd2-build.sh") ||
	die "building containerd $VM_CONTAINERD_VERSION failed"

CTR_DIR="$REPO_ROOT/.cache/ctr/$VM_CONTAINERD_VERSION"
wrapper_build ctr github.com/containerd/containerd/v2 "$VM_CONTAINERD_VERSION" github.com/containerd/containerd/v2/cmd/ctr \
	"$CTR_DIR" "-s -w"

RUNC_DIR="$REPO_ROOT/.cache/runc/$RUNC_VERSION"
if [ ! -x "$RUNC_DIR/bin/runc" ]; then
	pkg-config --exists libseccomp 2>/dev/null || die "runc needs libseccomp-dev and pkg-config on the host (make vm-up installs them)"
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

CRICTL_DIR="$REPO_ROOT/.cache/crictl/$CRICTL_VERSION"
if [ ! -x "$CRICTL_DIR/bin/crictl" ]; then
	log "building crictl $CRICTL_VERSION"
	mkdir -p "$CRICTL_DIR/bin"
	GOBIN="$CRICTL_DIR/bin" CGO_ENABLED=0 go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" >&2 || die "building crictl failed"
fi

echo "VM_CONTAINERD_BIN=$VM_CONTAINERD_BIN"
echo "VM_CTR=$CTR_DIR/bin/ctr"
echo "VM_RUNC=$RUNC_DIR/bin/runc"
echo "VM_CRICTL=$CRICTL_DIR/bin/crictl"
