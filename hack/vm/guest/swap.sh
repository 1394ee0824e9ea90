#!/usr/bin/env bash
# swap.sh AGENT BINARY: runs in the test bed's guest (piped over ssh by
# hack/vm/e2e.sh). With swap on (/swapfile): the agent with a configuration
# that leaves failSwapOn at its default must refuse to start with
# upstream's message; with failSwapOn: false and memorySwap.swapBehavior
# LimitedSwap it runs a static Burstable pod whose container gets no swap
# (memory.swap.max 0: a static pod is critical, and critical pods get
# NoSwap, as upstream). Prints "ok NAME: DETAIL" / "FAIL NAME: DETAIL" and
# "measure NAME VALUE" lines; exits 0 (the host decides).
set -u
AGENT=$1 BIN=$2
UNIT=e2e-swap-$AGENT
ETC=/etc/e2e-swap-$AGENT
ROOT=/var/lib/e2e-swap-$AGENT
POD_UID=33333333-4444-5555-6666-77777777777${AGENT:0:1}
ok() { echo "ok $1: $2"; }
fail() { echo "FAIL $1: $2"; }
check() { if [ "$2" = "$3" ]; then ok "$1" "$3"; else fail "$1" "got '$3', want '$2'"; fi; }
cleanup() {
	systemctl stop "$UNIT" >/dev/null 2>&1
	systemctl reset-failed "$UNIT" >/dev/null 2>&1
	crictl rmp -fa >/dev/null 2>&1
	rm -rf "$ETC" "$ROOT"
}
start() { # start EXTRA-CONFIG
	systemctl stop "$UNIT" >/dev/null 2>&1
	systemctl reset-failed "$UNIT" >/dev/null 2>&1
	cat >"$ETC/config.yaml" <<C
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
staticPodPath: $ETC/manifests
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
$1
C
	systemd-run --quiet --unit "$UNIT" "$BIN" --config "$ETC/config.yaml" --root-dir "$ROOT" \
		--hostname-override "e2e-swap-$AGENT" --v 2
}

cleanup
trap 'cleanup; swapoff /swapfile 2>/dev/null' EXIT
mkdir -p "$ETC/manifests" "$ROOT"
swapon /swapfile 2>/dev/null
check "swap on" 2 "$(wc -l </proc/swaps)"

start ""
for _ in $(seq 60); do systemctl is-active -q "$UNIT" || break; sleep 1; done
if systemctl is-active -q "$UNIT"; then
	fail "failSwapOn default refuses" "still running after 60 s with swap on"
elif journalctl -u "$UNIT" --no-pager | grep -q 'running with swap on is not supported, please disable swap or set --fail-swap-on flag to false'; then
	ok "failSwapOn default refuses" "upstream's message in its log"
else
	fail "failSwapOn default refuses" "stopped without upstream's message; last lines:"
	journalctl -u "$UNIT" --no-pager -n 8 | sed 's/^/    /'
fi

cat >"$ETC/manifests/burst.yaml" <<P
apiVersion: v1
kind: Pod
metadata: {name: swap, namespace: default, uid: $POD_UID}
spec:
  containers:
  - name: c
    image: docker.io/library/busybox:1.36
    command: [sleep, "3600"]
    resources:
      requests: {memory: 64Mi}
      limits: {memory: 256Mi}
P
start $'failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}'
ctr=""
for _ in $(seq 120); do
	ctr=$(crictl ps --state running --name '^c$' --label "io.kubernetes.pod.uid=$POD_UID" -q 2>/dev/null | head -1)
	[ -n "$ctr" ] && break
	systemctl is-active -q "$UNIT" || break
	sleep 1
done
if [ -z "$ctr" ]; then
	fail "failSwapOn false runs a pod" "no running container; $AGENT $(systemctl is-active "$UNIT"); last lines:"
	journalctl -u "$UNIT" --no-pager -n 10 | sed 's/^/    /'
	exit 0
fi
ok "failSwapOn false runs a pod" "container ${ctr:0:12}"
scope=$(ls -d /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_UID//-/_}.slice/cri-containerd-"$ctr"*.scope 2>/dev/null | head -1)
check "static Burstable pod under LimitedSwap: container memory.swap.max" 0 "$(cat "$scope/memory.swap.max" 2>&1)"
check "its memory.max" 268435456 "$(cat "$scope/memory.max" 2>&1)"
