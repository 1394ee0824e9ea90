#!/usr/bin/env bash
# make conformance: upstream's NodeConformance e2e suite against the upstream
# kubelet and nodelet, one after the other on this machine, and
# docs/conformance.md with both. Builds e2e.test, ginkgo and the test images
# offline first (cached). CONFORMANCE_FOCUS / CONFORMANCE_SKIP narrow the
# selection (ginkgo regular expressions), CONFORMANCE_AGENTS picks the agents
# (default upstream,nodelet), CONFORMANCE_PROCS the parallel processes (4);
# CONFORMANCE_RERUN=1 reruns the selected tests beside the full runs (the
# report takes the rerun's outcome for them).
# The whole selection takes about an hour per agent on 2 cores.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
need_root

bash hack/stack-up.sh
bash hack/cluster/up.sh
bash hack/conformance/build.sh
set -a
# shellcheck source=/dev/null
source "$STACK_DIR/env"
set +a

# No kube-proxy here: service IPs go nowhere instead of to the host's
# default route.
ip route show type blackhole | grep -q '^blackhole 10.96.0.0/12' || ip route add blackhole 10.96.0.0/12

# OpenBSD nc for the agnhost image (busybox's has no -u).
dpkg-query -W -f='${Status}' netcat-openbsd 2>/dev/null | grep -q "install ok installed" ||
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends netcat-openbsd >/dev/null; } ||
	die "installing netcat-openbsd failed"
log "pushing the e2e test images into the local registry"
go build -o "$STACK_DIR/bin/e2eimages" ./hack/tools/e2eimages
k8s_src=$(cd "${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/${K8S_VERSION:-v1.37.2}/e2e-wrapper" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
"$STACK_DIR/bin/e2eimages" --registry "$REGISTRY" --bin "$K8S_BIN" --k8s-src "$k8s_src" --pause "$STACK_DIR/bin/pause"
# The suite's private image (upstream's gcr.io/k8s-authenticated-test/agnhost:2.6)
# in the stack's private registry, which only the agents' credential provider
# plugin gives the credentials of (test/conformance's credentialProvider).
"$STACK_DIR/bin/imagecopy" --src "$REGISTRY/e2e-test-images/agnhost:2.66.1" \
	--dst "$PRIVATE_REGISTRY/k8s-authenticated-test/agnhost:2.6" --user "$PRIVATE_REGISTRY_USER" \
	--password-file "$STACK_DIR/private-registry/password" || die "pushing the private agnhost:2.6 failed"
# containerd's copies of earlier builds go, so every agent pulls these.
ctr_k8s() { "${CTR:-ctr}" --connect-timeout 1s --address "$STACK_DIR/containerd/containerd.sock" -n k8s.io "$@"; }
for ref in $(ctr_k8s images ls -q); do
	[[ "$ref" =~ ^registry\.k8s\.io/(e2e-test-images/|pause:3\.10\.2) ]] && ctr_k8s images rm "$ref" >/dev/null
done

go build -o bin/nodelet ./cmd/nodelet
go run ./test/conformance \
	--agents "${CONFORMANCE_AGENTS:-upstream,nodelet}" \
	--focus "${CONFORMANCE_FOCUS:-\[NodeConformance\]}" \
	--skip "${CONFORMANCE_SKIP:-\[Slow\]|\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:}" \
	--procs "${CONFORMANCE_PROCS:-4}" ${CONFORMANCE_RERUN:+--rerun} "$@"
log "report: docs/conformance.md (raw ginkgo reports and agent logs in .cache/conformance)"
