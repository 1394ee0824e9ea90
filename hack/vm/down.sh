#!/usr/bin/env bash
# vm-down: powers the test bed's guest off cleanly (systemctl poweroff over
# ssh, then ACPI power-off through qemu's monitor, then SIGKILL after
# VM_DOWN_TIMEOUT seconds) and removes the host's forwards, tap device and
# bridge. The run disk and the console log stay in .stack/vm/ for a look
# after the fact (the next vm-up replaces them). Idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
t0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# wait_gone SECONDS: true once qemu has exited.
wait_gone() {
	local end=$(($(date +%s) + $1))
	while vm_running; do
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.5
	done
}

if vm_running; then
	pid=$(cat "$VM_PIDFILE")
	how=""
	log "powering the guest off (systemctl poweroff)"
	timeout 15 bash -c "source '$REPO_ROOT/hack/vm/lib.sh'; vm_ssh systemctl poweroff" >/dev/null 2>&1 || true
	if wait_gone "$VM_DOWN_TIMEOUT"; then
		how="powered off"
	else
		log "the guest still runs after ${VM_DOWN_TIMEOUT}s: ACPI power button (qemu monitor)"
		echo system_powerdown | timeout 5 socat - "UNIX-CONNECT:$VM_MONITOR" >/dev/null 2>&1 || true
		if wait_gone 20; then
			how="powered off (ACPI)"
		else
			log "killing qemu (pid $pid)"
			kill "$pid" 2>/dev/null || true
			wait_gone 5 || kill -9 "$pid" 2>/dev/null || true
			wait_gone 5 || die "qemu (pid $pid) does not exit"
			how="killed"
			vm_console_tail 20
		fi
	fi
	log "guest $how in $(elapsed "$t0")s"
fi
rm -f "$VM_PIDFILE" "$VM_MONITOR"
if [ -S "$VM_SSH_CTL" ]; then
	ssh -o ControlPath="$VM_SSH_CTL" -O exit "root@$VM_GUEST_IP" >/dev/null 2>&1 || true
	rm -f "$VM_SSH_CTL"
fi
vm_forwards_down
vm_net_down
mountpoint -q "$VM_DIR/mnt" 2>/dev/null && umount "$VM_DIR/mnt"
log "vm-down done in $(elapsed "$t0")s (bridge $VM_BRIDGE, tap $VM_TAP and forwards removed)"
