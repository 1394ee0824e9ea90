# shellcheck shell=bash
# Common settings for the harness scripts. Sourced, never run.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STACK_DIR="${STACK_DIR:-$REPO_ROOT/.stack}"
REGISTRY_ADDR="${REGISTRY_ADDR:-127.0.0.1:35000}"
# The CNI bridge and its subnet. The bridge's gateway address doubles as a
# non-loopback node IP for agents running on this machine.
CNI_BRIDGE="${CNI_BRIDGE:-nodelet0}"
CNI_SUBNET="${CNI_SUBNET:-10.88.0.0/16}"
CNI_GATEWAY="${CNI_GATEWAY:-10.88.0.1}"
PAUSE_IMAGE="registry.k8s.io/pause:3.10"
BUSYBOX_IMAGE="docker.io/library/busybox:1.36"
CRICTL_VERSION="v1.37.0"
# The stack's runtime: containerd 2 (built from the Go module proxy, with
# runc from it too; the default) or Debian's containerd 1.6 (STACK_RUNTIME=
# containerd1, while upstream still supports 1.x). The test bed's guest runs
# the same containerd 2 and runc.
STACK_RUNTIME="${STACK_RUNTIME:-containerd2}"
CONTAINERD2_VERSION="${CONTAINERD2_VERSION:-v2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-v1.5.3}"
DEMO_DIR="$STACK_DIR/demo"
DEMO_PID="$DEMO_DIR/nodelet.pid"
DEMO_NODE="nodelet-demo"

# Test images served slowly by the test registry (slow/busybox:1..N, every
# manifest request delayed): for measuring parallel pulls.
SLOW_IMAGE_COUNT="${SLOW_IMAGE_COUNT:-8}"
SLOW_IMAGE_DELAY="${SLOW_IMAGE_DELAY:-1s}"
# A private registry (Debian's docker-registry with htpasswd basic auth) and
# the busybox image copied into it.
PRIVATE_REGISTRY_ADDR="${PRIVATE_REGISTRY_ADDR:-127.0.0.1:35001}"
PRIVATE_REGISTRY_USER="nodelet"
PRIVATE_IMAGE="$PRIVATE_REGISTRY_ADDR/private/busybox:1.36"
PRIVATE_REGISTRY_DIR="$STACK_DIR/private-registry"
PRIVATE_REGISTRY_PID="$PRIVATE_REGISTRY_DIR/registry.pid"

CONTAINERD_DIR="$STACK_DIR/containerd"
CONTAINERD_SOCK="$CONTAINERD_DIR/containerd.sock"
CONTAINERD_PID="$CONTAINERD_DIR/containerd.pid"
REGISTRY_PID="$STACK_DIR/registry/registry.pid"
# containerd's Prometheus endpoint (/v1/metrics): its gRPC servers' call
# counts by method, which the benchmarks read to count each agent's CRI
# calls.
CONTAINERD_METRICS_ADDR="${CONTAINERD_METRICS_ADDR:-127.0.0.1:35010}"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "the harness must run as root (it starts containerd and sets up networking)"; }

# pid_alive FILE: true if FILE names a running process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Go settings shared by every build in the harness. Go needs a home for its
# caches, even where the environment has none.
export HOME="${HOME:-/root}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export PATH="/usr/local/go/bin:$PATH"

# k8s_ldflags VERSION: the linker flags that stamp a Kubernetes binary or
# test suite built from the module proxy with its release version.
k8s_ldflags() {
	local minor=${1#v1.}
	minor=${minor%%.*}
	echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$1"
}

# wrapper_build NAME MODULE VERSION PKG DIR LDFLAGS: builds PKG (a command
# of MODULE@VERSION, e.g. MODULE/cmd/x) into DIR/bin/NAME through a wrapper
# module in DIR/wrapper that repeats MODULE's replace directives (a
# dependency's replaces are not inherited). Nothing when the binary is there.
wrapper_build() {
	local name=$1 mod=$2 version=$3 pkg=$4 dir=$5 ldflags=$6 gomod
	[ -x "$dir/bin/$name" ] && return 0
	command -v go >/dev/null || die "go is not installed"
	mkdir -p "$dir/wrapper" "$dir/bin"
	if [ ! -f "$dir/wrapper/go.sum" ]; then
		log "preparing the wrapper module for $mod $version"
		gomod=$(cd "$dir/wrapper" && GOFLAGS=-mod=mod go mod download -json "$mod@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')
		[ -f "$gomod" ] || die "cannot download $mod@$version"
		{
			echo "module nodelet.local/$name-wrapper"
			echo
			echo "go 1.26"
			echo
			echo "require $mod $version"
			echo
			grep -E '^replace ' "$gomod" || true
		} >"$dir/wrapper/go.mod"
		printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$dir/wrapper/tools.go"
		(cd "$dir/wrapper" && go mod tidy) >&2 || die "go mod tidy of the $name wrapper failed"
	fi
	log "building $name $version"
	(cd "$dir/wrapper" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/bin/$name.tmp" "$pkg") >&2 || die "building $name failed"
	mv "$dir/bin/$name.tmp" "$dir/bin/$name"
}
