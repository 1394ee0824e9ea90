#!/usr/bin/env bash
# cluster-down: stops the control plane by PID and removes its etcd data and
# the cluster block of .stack/env. Certificates are kept.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CL="$STACK_DIR/cluster"
for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
	f="$CL/run/$name.pid"
	pid_alive "$f" || { rm -f "$f"; continue; }
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	rm -f "$f"
done
rm -rf "$CL/etcd"
[ -f "$STACK_DIR/env" ] && sed -i '/^# cluster-up begin/,/^# cluster-up end/d' "$STACK_DIR/env"
log "control plane down"
