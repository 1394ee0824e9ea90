#!/usr/bin/env bash
# Builds the CSI sidecars the tests run beside the project's host-path
# driver, from the Go module proxy: external-provisioner (dynamic
# provisioning) and external-attacher (VolumeAttachments). Each gets its own
# wrapper module (their client-go versions differ) that repeats its go.mod's
# replace directives (a dependency's replaces are not inherited). Binaries
# are cached in .cache/csi/<name>-<version>/bin (git-ignored).
# Cold on 2 cores: ~3 minutes each; warm: nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

CSI_CACHE="${CSI_CACHE_DIR:-$REPO_ROOT/.cache/csi}"
# name module version command
SIDECARS=(
	"csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 cmd/csi-provisioner"
	"csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0 cmd/csi-attacher"
)
command -v go >/dev/null || die "go is not installed"
for s in "${SIDECARS[@]}"; do
	read -r name mod version cmd <<<"$s"
	dir="$CSI_CACHE/$name-$version"
	[ -x "$dir/bin/$name" ] && continue
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
			grep -E '^replace ' "$gomod"
		} >"$dir/wrapper/go.mod"
		cat >"$dir/wrapper/tools.go" <<GO
//go:build tools

package tools

import _ "$mod/$cmd"
GO
		(cd "$dir/wrapper" && go mod tidy) || die "go mod tidy of the $name wrapper failed"
	fi
	log "building $name $version"
	(cd "$dir/wrapper" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$dir/bin/$name.tmp" "$mod/$cmd") || die "building $name failed"
	mv "$dir/bin/$name.tmp" "$dir/bin/$name"
done
for s in "${SIDECARS[@]}"; do
	read -r name _ version _ <<<"$s"
	echo "$CSI_CACHE/$name-$version/bin/$name"
done
