#!/usr/bin/env bash
# vm-up: boots the real-node test bed, a Debian 12 guest under qemu with
# systemd, cgroup v2, containerd 2 and runc (SystemdCgroup = true), on a
# bridge with the host, and waits until ssh answers. Idempotent: a guest that
# runs and answers is kept. Every boot starts from a fresh copy of the cached
# base image. See docs/real-node.md.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
t_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

vm_install_packages
[ -c /dev/net/tun ] || die "/dev/net/tun is missing: the guest's tap device needs it"
mkdir -p "$VM_DIR"

if vm_running; then
	if timeout 20 bash -c "source '$REPO_ROOT/hack/vm/lib.sh'; vm_ssh true" 2>/dev/null; then
		log "the guest already runs (pid $(cat "$VM_PIDFILE")) and answers: kept (make vm-down stops it)"
		exec bash "$REPO_ROOT/hack/vm/status.sh"
	fi
	die "a guest runs (pid $(cat "$VM_PIDFILE")) but ssh does not answer: make vm-down first"
fi
# Leftovers of a guest that is gone.
vm_forwards_down
rm -f "$VM_SSH_CTL" "$VM_PIDFILE"

IMG=$(bash "$REPO_ROOT/hack/vm/image.sh") || die "building the guest's base image failed"
RUNTIME=$(bash "$REPO_ROOT/hack/vm/runtime-build.sh") || die "building the guest's container runtime failed"
while IFS='=' read -r k v; do export "$k=$v"; done <<<"$RUNTIME"
ln -sfn "$IMG" "$VM_IMAGE_LINK"

# The run disk: a fresh sparse copy of the base image with the runtime, its
# configuration and the network put in before boot.
t=$(date +%s.%N)
rm -f "$VM_DISK"
cp --sparse=always "$IMG/disk.img" "$VM_DISK"
MNT="$VM_DIR/mnt"
mkdir -p "$MNT"
mountpoint -q "$MNT" && umount "$MNT"
mount -o loop "$VM_DISK" "$MNT" || die "cannot loop-mount $VM_DISK"
if ! bash "$REPO_ROOT/hack/vm/overlay.sh" "$MNT"; then
	umount "$MNT"
	die "installing the runtime into the guest's disk failed"
fi
umount "$MNT"
log "run disk $VM_DISK ready in $(elapsed "$t")s (base image $IMG)"

vm_net_up
vm_forwards_up

# KVM only when it can run a guest here: /dev/kvm, then a probe boot of the
# guest's kernel that must print the kernel's banner within 10 s (on some
# machines /dev/kvm opens but a guest hangs before the kernel prints
# anything). Otherwise TCG.
detect_accel() {
	case "$VM_ACCEL" in
	kvm | tcg) log "accelerator $VM_ACCEL (VM_ACCEL)"; echo "$VM_ACCEL"; return ;;
	auto) ;;
	*) die "VM_ACCEL must be auto, kvm or tcg, not $VM_ACCEL" ;;
	esac
	if [ ! -c /dev/kvm ]; then
		log "no /dev/kvm: TCG (software emulation)"
		echo tcg
		return
	fi
	local flags=no probe="$VM_DIR/kvm-probe.log"
	grep -qwE 'vmx|svm' /proc/cpuinfo && flags=yes
	rm -f "$probe"
	timeout 10 qemu-system-x86_64 -accel kvm -cpu host -m 256 -kernel "$IMG/vmlinuz" \
		-append "console=ttyS0 panic=-1" -display none -vga none -serial "file:$probe" -monitor none -no-reboot \
		>/dev/null 2>&1 || true
	if grep -q "Linux version" "$probe" 2>/dev/null; then
		log "KVM: /dev/kvm runs a guest (probe boot printed the kernel's banner; vmx/svm flags: $flags)"
		echo kvm
	else
		log "/dev/kvm exists (vmx/svm flags: $flags) but a probe boot printed nothing in 10 s: TCG (software emulation)"
		echo tcg
	fi
}
ACCEL=$(detect_accel)
if [ "$ACCEL" = kvm ]; then
	ACCEL_ARGS=(-accel kvm -cpu host)
else
	ACCEL_ARGS=(-accel tcg,thread=multi -cpu max)
fi
echo "$ACCEL" >"$VM_DIR/accel"

# NUMA nodes (VM_NUMA > 1): each a RAM backend and an even share of the
# CPUs, as a multi-socket machine shows them to the guest.
NUMA_ARGS=()
if [ "$VM_NUMA" -gt 1 ]; then
	[ $((VM_SMP % VM_NUMA)) -eq 0 ] && [ $((VM_MEM % VM_NUMA)) -eq 0 ] ||
		die "VM_SMP=$VM_SMP and VM_MEM=$VM_MEM must both split evenly into VM_NUMA=$VM_NUMA nodes"
	per_cpus=$((VM_SMP / VM_NUMA)) per_mem=$((VM_MEM / VM_NUMA))
	for ((i = 0; i < VM_NUMA; i++)); do
		NUMA_ARGS+=(-object "memory-backend-ram,id=mem$i,size=${per_mem}M"
			-numa "node,nodeid=$i,cpus=$((i * per_cpus))-$(((i + 1) * per_cpus - 1)),memdev=mem$i")
	done
	ACCEL_ARGS+=(-smp "$VM_SMP,sockets=$VM_NUMA,cores=$per_cpus,threads=1")
else
	ACCEL_ARGS+=(-smp "$VM_SMP")
fi

rm -f "$VM_CONSOLE" "$VM_MONITOR"
log "booting the guest: ${ACCEL_ARGS[*]} -m $VM_MEM ${NUMA_ARGS[*]} (console: $VM_CONSOLE)"
t_boot=$(date +%s.%N)
qemu-system-x86_64 -name "$VM_HOSTNAME" "${ACCEL_ARGS[@]}" -m "$VM_MEM" "${NUMA_ARGS[@]}" \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" -append "console=ttyS0 root=/dev/vda rw panic=-1" \
	-drive "file=$VM_DISK,format=raw,if=virtio,cache=unsafe" \
	-netdev "tap,id=net0,ifname=$VM_TAP,script=no,downscript=no" -device "virtio-net-pci,netdev=net0,mac=$VM_MAC" \
	-device virtio-rng-pci \
	-display none -vga none -serial "file:$VM_CONSOLE" -monitor "unix:$VM_MONITOR,server,nowait" \
	-no-reboot -daemonize -pidfile "$VM_PIDFILE" >"$VM_DIR/qemu.log" 2>&1 ||
	{ cat "$VM_DIR/qemu.log" >&2; vm_forwards_down; vm_net_down; die "qemu did not start"; }

# fail WHAT: stops what this run started and names what failed, with the console's tail.
fail() {
	vm_console_tail 40
	if vm_running; then kill "$(cat "$VM_PIDFILE")" 2>/dev/null || true; fi
	sleep 1
	if vm_running; then kill -9 "$(cat "$VM_PIDFILE")" 2>/dev/null || true; fi
	vm_forwards_down
	vm_net_down
	die "$1"
}

deadline=$(($(date +%s) + VM_BOOT_TIMEOUT))
while :; do
	if ! vm_running; then
		[ -s "$VM_DIR/qemu.log" ] && cat "$VM_DIR/qemu.log" >&2
		fail "qemu exited during the boot (a kernel panic or a power-off; accelerator $ACCEL)"
	fi
	if timeout 3 bash -c "</dev/tcp/$VM_GUEST_IP/22" 2>/dev/null && timeout 30 bash -c "source '$REPO_ROOT/hack/vm/lib.sh'; vm_ssh true" 2>/dev/null; then
		break
	fi
	if [ "$(date +%s)" -ge "$deadline" ]; then
		console=$(tr -d '\r' <"$VM_CONSOLE" 2>/dev/null || true)
		if [ -z "$console" ]; then
			what="the guest printed nothing on its console (accelerator $ACCEL: the kernel never started)"
		elif ! grep -q "Linux version" <<<"$console"; then
			what="the kernel never printed its banner (accelerator $ACCEL)"
		elif ! grep -qE "systemd\[1\]|Welcome to" <<<"$console"; then
			what="the kernel started but systemd never ran (root file system or initramfs)"
		elif ! grep -qE "OpenSSH|ssh.service" <<<"$console"; then
			what="systemd ran but never started sshd"
		else
			what="sshd started but never answered on $VM_GUEST_IP:22 (the network: $VM_BRIDGE/$VM_TAP)"
		fi
		fail "the guest did not answer ssh within VM_BOOT_TIMEOUT=${VM_BOOT_TIMEOUT}s: $what"
	fi
	sleep 2
done
boot_s=$(elapsed "$t_boot")
echo "$boot_s" >"$VM_DIR/boot-seconds"
log "the guest answers ssh ${boot_s}s after qemu started (accelerator $ACCEL); vm-up took $(elapsed "$t_start")s so far"
bash "$REPO_ROOT/hack/vm/status.sh" || fail "the guest is up but not a working node (above)"
log "vm-up done in $(elapsed "$t_start")s: hack/vm/ssh.sh CMD... runs commands in the guest; make vm-down stops it"
