#!/usr/bin/env bash
# Builds upstream's node e2e suite from the Go module proxy for the real-node
# bed (issue 37): e2e_node.test (k8s.io/kubernetes/test/e2e_node), through a wrapper module of its own (the control
# plane's, hack/cluster/build.sh, plus the suite's test dependencies). Cached
# in .cache/k8s/<version>/bin (git-ignored). Cold on 2 cores: ~8 minutes.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION"
BIN="$CACHE/bin"
WRAP="$CACHE/node-e2e-wrapper"

bash "$REPO_ROOT/hack/cluster/build.sh" || die "building the control plane's wrapper failed"
[ -x "$BIN/e2e_node.test" ] && exit 0

mkdir -p "$WRAP"
if [ ! -f "$WRAP/go.sum" ]; then
	log "preparing the node e2e wrapper module for k8s.io/kubernetes $K8S_VERSION"
	sed 's|^module .*|module nodelet.local/k8s-node-e2e-wrapper|' "$CACHE/wrapper/go.mod" >"$WRAP/go.mod"
	cp "$CACHE/wrapper/go.sum" "$WRAP/go.sum"
	cat >"$WRAP/tools.go" <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/test/e2e_node"
)
GO
	# Pinned: without the version go get would upgrade k8s.io/kubernetes.
	(cd "$WRAP" && go get -t "k8s.io/kubernetes/test/e2e_node@$K8S_VERSION" && go mod tidy) >&2 ||
		{ rm -f "$WRAP/go.sum"; die "resolving the node e2e test dependencies failed"; }
fi

ldflags="$(k8s_ldflags "$K8S_VERSION")"
if [ ! -x "$BIN/e2e_node.test" ]; then
	log "building e2e_node.test $K8S_VERSION (cold on 2 cores: ~8 min)"
	(cd "$WRAP" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$ldflags" -o "$BIN/e2e_node.test.tmp" k8s.io/kubernetes/test/e2e_node) ||
		die "building e2e_node.test failed"
	mv "$BIN/e2e_node.test.tmp" "$BIN/e2e_node.test"
fi
log "node e2e binaries in $BIN"
