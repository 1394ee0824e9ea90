#!/usr/bin/env bash
# Builds metrics-server (what `kubectl top` reads) from the Go module proxy
# through a wrapper module (hack/lib.sh wrapper_build) and prints the
# binary's path. v0.8.0: the newest approved release the proxy serves
# (v0.9.0 is served but not approved for use here). Cached in
# .cache/metrics-server/<version>/bin (git-ignored).
# Cold on 2 cores: ~3 minutes; warm: nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

MS_VERSION="${METRICS_SERVER_VERSION:-v0.8.0}"
MOD=sigs.k8s.io/metrics-server
dir="${METRICS_SERVER_CACHE_DIR:-$REPO_ROOT/.cache/metrics-server}/$MS_VERSION"
wrapper_build metrics-server "$MOD" "$MS_VERSION" "$MOD/cmd/metrics-server" "$dir" "-s -w -X $MOD/pkg/version.gitVersion=$MS_VERSION"
echo "$dir/bin/metrics-server"
