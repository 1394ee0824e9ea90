#!/usr/bin/env bash
# The container runtime the test bed's guest runs, built on the host from the
# Go module proxy (the guest is Debian 12 like the host, so cgo binaries link
# against the same glibc and libseccomp2):
#   containerd v2 + containerd-shim-runc-v2  hack/containerd2-build.sh (.cache/containerd/<version>, or CONTAINERD2_CACHE_DIR)
#   ctr                                       the same module, .cache/ctr/<version>
#   runc                                      hack/runc-build.sh (.cache/runc/<version>)
#   crictl                                    sigs.k8s.io/cri-tools, .cache/crictl/<version>
# Each is cached; a warm run takes no time. Prints NAME=PATH lines.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
command -v go >/dev/null || die "go is not installed (expected at /usr/local/go/bin)"

VM_CONTAINERD_BIN=$(CONTAINERD2_VERSION="$VM_CONTAINERD_VERSION" bash "$REPO_ROOT/hack/containerd2-build.sh") ||
	die "building containerd $VM_CONTAINERD_VERSION failed"

CTR_DIR="$REPO_ROOT/.cache/ctr/$VM_CONTAINERD_VERSION"
wrapper_build ctr github.com/containerd/containerd/v2 "$VM_CONTAINERD_VERSION" github.com/containerd/containerd/v2/cmd/ctr \
	"$CTR_DIR" "-s -w"

VM_RUNC=$(bash "$REPO_ROOT/hack/runc-build.sh") || die "building runc $RUNC_VERSION failed"

CRICTL_DIR="$REPO_ROOT/.cache/crictl/$CRICTL_VERSION"
if [ ! -x "$CRICTL_DIR/bin/crictl" ]; then
	log "building crictl $CRICTL_VERSION"
	mkdir -p "$CRICTL_DIR/bin"
	GOBIN="$CRICTL_DIR/bin" CGO_ENABLED=0 go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" >&2 || die "building crictl failed"
fi

echo "VM_CONTAINERD_BIN=$VM_CONTAINERD_BIN"
echo "VM_CTR=$CTR_DIR/bin/ctr"
echo "VM_RUNC=$VM_RUNC"
echo "VM_CRICTL=$CRICTL_DIR/bin/crictl"
