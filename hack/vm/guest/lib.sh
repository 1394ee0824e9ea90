# shellcheck shell=bash
# What every scenario of hack/vm/guest/ shares: hack/vm/e2e.sh pipes this
# file, then the scenario, into bash in the guest. A scenario sets AGENT,
# BIN, UNIT, ETC and ROOT first (UNIT: the agent's transient systemd unit;
# ETC: its configuration and manifests; ROOT: its --root-dir).

ok() { echo "ok $1: $2"; }
fail() { echo "FAIL $1: $2"; }
check() { # check NAME WANT GOT
	if [ "$2" = "$3" ]; then ok "$1" "$3"; else fail "$1" "got '$3', want '$2'"; fi
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
prop() { systemctl show "$1" -p "$2" --value 2>/dev/null; }

# running_ctr UID: the running container "c" of the pod with this UID.
running_ctr() { crictl ps --state running --name '^c$' --label "io.kubernetes.pod.uid=$1" -q 2>/dev/null | head -1; }

# agent_stop and agent_cleanup: the agent stopped; then its pods and files gone.
agent_stop() {
	systemctl stop "$UNIT" >/dev/null 2>&1
	systemctl reset-failed "$UNIT" >/dev/null 2>&1
}
agent_cleanup() {
	agent_stop
	crictl rmp -fa >/dev/null 2>&1
	rm -rf "$ETC" "$ROOT"
}

# agent_start DRIVER [EXTRA-CONFIG]: (re)starts the agent standalone as the
# unit UNIT with static pods from ETC/manifests, cgroupDriver DRIVER and
# the lines EXTRA-CONFIG.
agent_start() {
	agent_stop
	AGENT_STARTED=$(date +%s)
	mkdir -p "$ETC/manifests" "$ROOT"
	cat >"$ETC/config.yaml" <<C
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $1
staticPodPath: $ETC/manifests
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
${2:-}
C
	systemd-run --quiet --unit "$UNIT" "$BIN" --config "$ETC/config.yaml" --root-dir "$ROOT" \
		--hostname-override "$UNIT" --v 2
}

# agent_log: the agent's log since its last agent_start (the unit's
# journal also holds earlier runs of this boot).
agent_log() { journalctl -u "$UNIT" --since "@${AGENT_STARTED:-0}" --no-pager "$@"; }

# static_pod NAME UID REQUESTS LIMITS: writes a static pod with one busybox
# container "c" (sleep) and these resources (YAML flow maps).
static_pod() {
	mkdir -p "$ETC/manifests"
	cat >"$ETC/manifests/$1.yaml" <<P
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, uid: $2}
spec:
  containers:
  - name: c
    image: docker.io/library/busybox:1.36
    command: [sleep, "3600"]
    resources:
      requests: $3
      limits: $4
P
}

# wait_running UID SECONDS: prints the running container's ID once there,
# nothing when the agent stopped or time ran out.
wait_running() {
	local ctr="" i
	for ((i = 0; i < $2; i++)); do
		ctr=$(running_ctr "$1")
		[ -n "$ctr" ] && break
		systemctl is-active -q "$UNIT" || break
		sleep 1
	done
	echo "$ctr"
}
