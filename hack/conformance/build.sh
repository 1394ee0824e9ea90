#!/usr/bin/env bash
# Builds what the NodeConformance run needs, from the Go module proxy:
# e2e.test (k8s.io/kubernetes/test/e2e), the ginkgo CLI at the version
# k8s.io/kubernetes pins, and the binaries of the test images built offline
# (agnhost, nonewprivs' nnp). The wrapper module is the control plane's
# (hack/cluster/build.sh) plus the test dependencies, in a folder of its own
# so the control plane's module stays as it is. Cached in
# .cache/k8s/<version>/bin (git-ignored). Cold on 2 cores: ~6 minutes.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION"
BIN="$CACHE/bin"
WRAP="$CACHE/e2e-wrapper"

bash "$REPO_ROOT/hack/cluster/build.sh"
have_all() {
	local c
	for c in e2e.test ginkgo agnhost nnp; do [ -x "$BIN/$c" ] || return 1; done
}
have_all && exit 0

mkdir -p "$WRAP"
if [ ! -f "$WRAP/go.sum" ]; then
	log "preparing the e2e wrapper module for k8s.io/kubernetes $K8S_VERSION"
	sed 's|^module .*|module nodelet.local/k8s-e2e-wrapper|' "$CACHE/wrapper/go.mod" >"$WRAP/go.mod"
	cp "$CACHE/wrapper/go.sum" "$WRAP/go.sum"
	cat >"$WRAP/tools.go" <<GO
//go:build tools

package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
GO
	# Pinned: without the version go get would upgrade k8s.io/kubernetes.
	(cd "$WRAP" && go get -t "k8s.io/kubernetes/test/e2e@$K8S_VERSION" "k8s.io/kubernetes/test/images/agnhost@$K8S_VERSION" &&
		go mod tidy) >&2 || { rm -f "$WRAP/go.sum"; die "resolving the e2e test dependencies failed"; }
fi

# The ginkgo CLI must match the library e2e.test links.
GINKGO_VERSION=$(cd "$WRAP" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
ldflags="$(k8s_ldflags "$K8S_VERSION")"
if [ ! -x "$BIN/e2e.test" ]; then
	log "building e2e.test $K8S_VERSION (cold on 2 cores: ~5 min)"
	(cd "$WRAP" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$ldflags" -o "$BIN/e2e.test.tmp" k8s.io/kubernetes/test/e2e) ||
		die "building e2e.test failed"
	mv "$BIN/e2e.test.tmp" "$BIN/e2e.test"
fi
for p in agnhost:test/images/agnhost nnp:test/images/nonewprivs; do
	name=${p%%:*}
	[ -x "$BIN/$name" ] && continue
	log "building $name (test image binary)"
	(cd "$WRAP" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/$name.tmp" "k8s.io/kubernetes/${p#*:}") ||
		die "building $name failed"
	mv "$BIN/$name.tmp" "$BIN/$name"
done
if [ ! -x "$BIN/ginkgo" ]; then
	log "building ginkgo $GINKGO_VERSION"
	(cd "$WRAP" && go build -o "$BIN/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo) || die "building ginkgo failed"
	mv "$BIN/ginkgo.tmp" "$BIN/ginkgo"
fi
log "conformance binaries in $BIN"
