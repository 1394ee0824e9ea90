#!/usr/bin/env bash
# swap.sh AGENT BINARY: runs in the test bed's guest (piped over ssh by
# hack/vm/e2e.sh). With swap on (/swapfile): the agent with a configuration
# that leaves failSwapOn at its default must refuse to start with
# upstream's message; with failSwapOn: false and memorySwap.swapBehavior
# LimitedSwap it runs a static Burstable pod whose container gets no swap
# (memory.swap.max 0: a static pod is critical, and critical pods get
# NoSwap, as upstream). Uses hack/vm/guest/lib.sh (piped before it). Prints "ok NAME: DETAIL" / "FAIL NAME: DETAIL" and
# "measure NAME VALUE" lines; exits 0 (the host decides).
set -u
AGENT=$1 BIN=$2
UNIT=e2e-swap-$AGENT
ETC=/etc/e2e-swap-$AGENT
ROOT=/var/lib/e2e-swap-$AGENT
POD_UID=33333333-4444-5555-6666-77777777777${AGENT:0:1}
agent_cleanup
trap 'agent_cleanup; swapoff /swapfile 2>/dev/null' EXIT
swapon /swapfile 2>/dev/null
check "swap on" 2 "$(wc -l </proc/swaps)"

agent_start systemd
for _ in $(seq 60); do systemctl is-active -q "$UNIT" || break; sleep 1; done
if systemctl is-active -q "$UNIT"; then
	fail "failSwapOn default refuses" "still running after 60 s with swap on"
elif agent_log | grep -q 'running with swap on is not supported, please disable swap or set --fail-swap-on flag to false'; then
	ok "failSwapOn default refuses" "upstream's message in its log"
else
	fail "failSwapOn default refuses" "stopped without upstream's message; last lines:"
	agent_log -n 8 | sed 's/^/    /'
fi

static_pod swap "$POD_UID" "{memory: 64Mi}" "{memory: 256Mi}"
agent_start systemd $'failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}'
ctr=$(wait_running "$POD_UID" 120)
if [ -z "$ctr" ]; then
	fail "failSwapOn false runs a pod" "no running container; $AGENT $(systemctl is-active "$UNIT"); last lines:"
	agent_log -n 10 | sed 's/^/    /'
	exit 0
fi
ok "failSwapOn false runs a pod" "container ${ctr:0:12}"
scope=$(ls -d /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_UID//-/_}.slice/cri-containerd-"$ctr"*.scope 2>/dev/null | head -1)
check "LimitedSwap, static Burstable pod / container memory.swap.max" 0 "$(cat "$scope/memory.swap.max" 2>&1)"
check "LimitedSwap, static Burstable pod / container memory.max" 268435456 "$(cat "$scope/memory.max" 2>&1)"
