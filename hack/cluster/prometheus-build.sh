#!/usr/bin/env bash
# Builds Prometheus (the server; kubernetes_sd included, which Debian's
# package leaves out) from the Go module proxy through a wrapper module
# (hack/lib.sh wrapper_build) and prints the binary's path. Without the web
# UI's assets (built with npm upstream): the HTTP API the tests use is all
# there. Cached in .cache/prometheus/<version>/bin (git-ignored).
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

PROM_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
MOD=github.com/prometheus/prometheus
dir="${PROMETHEUS_CACHE_DIR:-$REPO_ROOT/.cache/prometheus}/$PROM_VERSION"
wrapper_build prometheus "$MOD" "$PROM_VERSION" "$MOD/cmd/prometheus" "$dir" "-s -w"
echo "$dir/bin/prometheus"
