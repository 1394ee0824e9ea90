#!/usr/bin/env bash
# Builds the control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kubelet for benchmarks), etcd and upstream's DRA
# test driver (test/e2e/dra/test-driver: the kubelet plugin the DRA tests
# run beside the agent, as dra-test-driver) from the Go module
# proxy, through a wrapper module that replaces each staging module of
# k8s.io/kubernetes with its published v0.x twin. Binaries are cached in
# .cache/k8s/<version>/bin (git-ignored): a second run costs nothing.
# Cold on 2 cores: ~16 minutes; from a warm Go build cache: seconds.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION"
BIN="$CACHE/bin"
WRAP="$CACHE/wrapper"
CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet)

have_all() {
	local c
	for c in "${CMDS[@]}" etcd dra-test-driver; do [ -x "$BIN/$c" ] || return 1; done
}
if have_all; then
	exit 0
fi
command -v go >/dev/null || die "go is not installed"
mkdir -p "$BIN" "$WRAP/cmd/etcd"

if [ ! -f "$WRAP/go.sum" ]; then
	log "preparing the wrapper module for k8s.io/kubernetes $K8S_VERSION"
	gomod=$(cd "$WRAP" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')
	[ -f "$gomod" ] || die "cannot download k8s.io/kubernetes@$K8S_VERSION"
	minor=${K8S_VERSION#v1.}
	{
		echo "module nodelet.local/k8s-wrapper"
		echo
		echo "go 1.26"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		# Every "k8s.io/X => ./staging/src/k8s.io/X" becomes "k8s.io/X => k8s.io/X v0.<minor>",
		# except the two samples that are not published.
		grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk '{print $1}' |
			grep -vE '^k8s.io/(sample-cli-plugin|sample-controller)$' |
			while read -r m; do echo "replace $m => $m v0.$minor"; done
	} >"$WRAP/go.mod"
	cat >"$WRAP/tools.go" <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e/dra/test-driver"
)
GO
	cat >"$WRAP/cmd/etcd/main.go" <<GO
// Command etcd is etcd's own main, built at the version kubernetes uses.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	(cd "$WRAP" && go mod tidy) || die "go mod tidy of the wrapper module failed"
fi

ldflags="$(k8s_ldflags "$K8S_VERSION") -X k8s.io/component-base/version/verflag.programName=kubernetes"
for c in "${CMDS[@]}"; do
	[ -x "$BIN/$c" ] && continue
	log "building $c $K8S_VERSION (cold on 2 cores: kube-apiserver ~12 min, the others ~4 min together)"
	(cd "$WRAP" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c") || die "building $c failed"
	mv "$BIN/$c.tmp" "$BIN/$c"
done
if [ ! -x "$BIN/etcd" ]; then
	log "building etcd"
	(cd "$WRAP" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" ./cmd/etcd) || die "building etcd failed"
	mv "$BIN/etcd.tmp" "$BIN/etcd"
fi
if [ ! -x "$BIN/dra-test-driver" ]; then
	log "building upstream's DRA test driver (test/e2e/dra/test-driver)"
	if ! grep -q test/e2e/dra/test-driver "$WRAP/tools.go"; then
		# A wrapper module prepared before the driver was one of its tools.
		sed -i 's|^\t_ "k8s.io/kubernetes/cmd/kubelet"$|&\n\t_ "k8s.io/kubernetes/test/e2e/dra/test-driver"|' "$WRAP/tools.go"
		(cd "$WRAP" && go mod tidy) || die "go mod tidy of the wrapper module failed"
	fi
	(cd "$WRAP" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/dra-test-driver.tmp" k8s.io/kubernetes/test/e2e/dra/test-driver) ||
		die "building the DRA test driver failed"
	mv "$BIN/dra-test-driver.tmp" "$BIN/dra-test-driver"
fi
log "control plane binaries in $BIN"
