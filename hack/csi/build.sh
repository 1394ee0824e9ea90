#!/usr/bin/env bash
# Builds the CSI sidecars the tests run beside the project's host-path
# driver, from the Go module proxy: external-provisioner (dynamic
# provisioning) and external-attacher (VolumeAttachments). Each gets its own
# wrapper module (their client-go versions differ; hack/lib.sh
# wrapper_build). Binaries are cached in .cache/csi/<name>-<version>/bin
# (git-ignored); their paths are printed.
# Cold on 2 cores: ~3 minutes each; warm: nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

CSI_CACHE="${CSI_CACHE_DIR:-$REPO_ROOT/.cache/csi}"
# name module version command
SIDECARS=(
	"csi-provisioner github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 cmd/csi-provisioner"
	"csi-attacher github.com/kubernetes-csi/external-attacher/v4 v4.13.0 cmd/csi-attacher"
)
for s in "${SIDECARS[@]}"; do
	read -r name mod version cmd <<<"$s"
	wrapper_build "$name" "$mod" "$version" "$mod/$cmd" "$CSI_CACHE/$name-$version" "-s -w -X main.version=$version"
done
for s in "${SIDECARS[@]}"; do
	read -r name _ version _ <<<"$s"
	echo "$CSI_CACHE/$name-$version/bin/$name"
done
