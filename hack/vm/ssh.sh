#!/usr/bin/env bash
# ssh.sh [CMD...]: runs CMD in the test bed's guest as root (over ssh with the
# image's key; stdin is passed on), or an interactive shell without CMD.
# Its exit status is CMD's (255 when ssh itself fails).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vm_running || die "no guest runs (make vm-up)"
mapfile -t opts < <(vm_ssh_opts)
if [ $# -eq 0 ]; then
	exec ssh -t "${opts[@]}" "root@$VM_GUEST_IP"
fi
exec ssh "${opts[@]}" "root@$VM_GUEST_IP" -- "$@"
