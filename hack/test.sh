#!/usr/bin/env bash
# The whole test suite: installs and starts what the tests need (the local
# stack), then runs the unit tests and the end-to-end tests against real
# containerd. `hack/test.sh e2e` runs only the end-to-end tests.
# With CI=true a missing dependency fails the run; nothing is skipped.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
need_root

what=${1:-all}
bash hack/stack-up.sh
# The control plane for the cluster-mode tests (built from the Go module
# proxy on the first run: minutes; cached in .cache/k8s afterwards).
bash hack/cluster/up.sh
go vet ./...
# The test fakes and test-only programs are a module of their own
# (test/fakes: their test frameworks stay out of the product's go.mod).
(cd test/fakes && go vet ./...)
# logcheck, upstream's logging linter (the one Kubernetes runs), built from
# the Go module proxy once: the product code logs only through contextual
# loggers (klog.FromContext, never klog's global functions); the per-file
# exceptions are in hack/logcheck.conf.
LOGCHECK_VERSION="v0.11.0"
logcheck="$STACK_DIR/bin/logcheck"
logcheck_built() {
	local info
	[ -x "$logcheck" ] && info=$(go version -m "$logcheck") &&
		grep -Eq "^[[:space:]]+mod[[:space:]]+sigs\.k8s\.io/logtools[[:space:]]+$LOGCHECK_VERSION([[:space:]]|\$)" <<<"$info"
}
if ! logcheck_built; then
	log "building logcheck $LOGCHECK_VERSION"
	mkdir -p "$STACK_DIR/bin"
	GOBIN="$STACK_DIR/bin" go install "sigs.k8s.io/logtools/logcheck@$LOGCHECK_VERSION" || die "building logcheck failed"
fi
log "logcheck"
"$logcheck" -check-contextual -config hack/logcheck.conf ./internal/... ./cmd/...
if [ "$what" = all ]; then
	log "unit tests"
	# The stack's variables: unit tests that talk to the real runtime use
	# CONTAINER_RUNTIME_ENDPOINT.
	set -a
	# shellcheck source=/dev/null
	source "$STACK_DIR/env"
	set +a
	# The harness's own packages too (image building, the benchmark's parsers,
	# the conformance report).
	go test -race -count=1 ./internal/... ./cmd/... ./hack/... ./bench/... ./test/agent/... ./test/conformance/...
	# The fakes' own tests (csi-sanity against the host-path CSI driver).
	(cd test/fakes && go test -race -count=1 ./...)
fi
log "end-to-end tests"
go test -count=1 -timeout 30m -v ./test/e2e/... 2>&1 | tee "$STACK_DIR/e2e.log"
