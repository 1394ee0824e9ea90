#!/usr/bin/env bash
# stack-down: stops everything stack-up started and removes what it left:
# pod processes, containerd and its shims, the registries, overlay and netns
# mounts under .stack, pod cgroups, the CNI bridge and the FORWARD rule.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

# Cgroup trees that hold pods: containerd's default parent and the kubelet's.
CGROUP_TREES=(k8s.io kubepods kubepods.slice)

cgroup_dirs() {
	local root t
	for root in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
		for t in "${CGROUP_TREES[@]}"; do
			[ -d "$root$t" ] && find "$root$t" -depth -type d
		done
	done 2>/dev/null || true
}

kill_pod_processes() {
	local d pids
	for _ in 1 2 3; do
		pids=$(cgroup_dirs | while read -r d; do cat "$d/cgroup.procs" 2>/dev/null; done | sort -u)
		[ -z "$pids" ] && return 0
		# shellcheck disable=SC2086
		kill -9 $pids 2>/dev/null || true
		sleep 0.2
	done
}

stop_pidfile() {
	local f=$1 pid
	pid_alive "$f" || { rm -f "$f"; return 0; }
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$f"
}

# Only shims of this stack's containerd: their command line names its socket.
kill_shims() {
	local p
	for p in $(pgrep -f "containerd-shim.*-address $CONTAINERD_SOCK" || true); do
		kill -9 "$p" 2>/dev/null || true
	done
}

unmount_under() {
	local m
	# Deepest first.
	for m in $(awk -v d="$1" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
}

stop_pidfile "$DEMO_PID"
bash "$REPO_ROOT/hack/cluster/down.sh" >/dev/null 2>&1 || true
kill_pod_processes
stop_pidfile "$CONTAINERD_PID"
kill_shims
stop_pidfile "$REGISTRY_PID"
stop_pidfile "$PRIVATE_REGISTRY_PID"
unmount_under "$STACK_DIR/"
cgroup_dirs | while read -r d; do rmdir "$d" 2>/dev/null || true; done
rm -rf "$CONTAINERD_DIR/root" "$CONTAINERD_DIR/state" "$CONTAINERD_DIR/runc" "$STACK_DIR/cni/networks"
if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
	for v in $(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
		ip link del "$v" 2>/dev/null || true
	done
	ip link del "$CNI_BRIDGE" 2>/dev/null || true
fi
while iptables -C FORWARD -s "$CNI_SUBNET" ! -d "$CNI_SUBNET" -j DROP 2>/dev/null; do
	iptables -D FORWARD -s "$CNI_SUBNET" ! -d "$CNI_SUBNET" -j DROP
done
rm -f "$STACK_DIR/env"
left=$(cgroup_dirs | wc -l)
[ "$left" -eq 0 ] || log "warning: $left pod cgroups could not be removed"
log "stack down"
