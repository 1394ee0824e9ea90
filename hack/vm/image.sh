#!/usr/bin/env bash
# The real-node test bed's base image: a Debian 12 guest made from Debian's
# packages only, cached under .cache/vm/<recipe hash>/ (the hash of this
# file and the suite: a change to the recipe builds a new image, the old one
# stays until removed). Prints the image directory:
#   disk.img            ext4 root file system (mkfs.ext4 -d from the debootstrap folder), sparse, with /swapfile (off)
#   vmlinuz initrd.img  Debian's kernel and initramfs, installed in the guest and copied out for -kernel/-initrd
#   ssh/                root's key for the guest (generated per image) and the guest's pinned host key
#   packages.txt        the guest's packages and versions
# What runs on top (containerd, runc, crictl, the network) is put on a copy
# of disk.img by hack/vm/up.sh at every vm-up, so it does not key this cache.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

DISK_SIZE=10G  # sparse; the guest's images and containers live there
SWAP_MIB=1024  # /swapfile, in /etc/fstab as noauto: `swapon /swapfile` turns it on
PACKAGES=(
	# the init system and the node's basics
	systemd systemd-sysv dbus libpam-systemd udev kmod iproute2 openssh-server openssh-sftp-server
	ca-certificates util-linux mount procps psmisc e2fsprogs netbase curl jq less iputils-ping strace lsof
	# what a container runtime and a kubelet need (kubeadm's preflight list too)
	libseccomp2 iptables containernetworking-plugins conntrack ethtool ebtables socat apparmor
)

MIRROR="${VM_MIRROR:-}"
if [ -z "$MIRROR" ]; then
	# The mirror this machine's apt sources name, else Debian's.
	MIRROR=$(sed -n 's#^URIs: *\(http[^ ]*/debian\)/\?$#\1#p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	MIRROR="${MIRROR:-http://deb.debian.org/debian}"
fi

IMG=$(vm_image_dir)
if [ -f "$IMG/done" ]; then
	echo "$IMG"
	exit 0
fi
mkdir -p "$VM_CACHE_ROOT/debs"
exec 9>"$VM_CACHE_ROOT/.lock"
flock 9
[ -f "$IMG/done" ] && { echo "$IMG"; exit 0; }
for c in debootstrap mkfs.ext4 ssh-keygen mkswap; do command -v $c >/dev/null || die "$c is missing (make vm-up installs the host's packages)"; done

TMP="$IMG.tmp"
ROOT="$TMP/rootfs"
MNT="$TMP/mnt"
MOUNTS=()
cleanup() {
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" 2>/dev/null || true; done
	MOUNTS=()
}
trap cleanup EXIT
mnt() { mount "$@" && MOUNTS+=("${!#}"); }
# A half-built image of an earlier run: nothing may be mounted under it.
if [ -d "$TMP" ]; then
	grep -o " $TMP[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done || true
	rm -rf "$TMP"
fi
mkdir -p "$TMP" "$MNT"
start=$(date +%s)

log "debootstrap $VM_SUITE from $MIRROR into $ROOT (a few minutes)"
debootstrap --variant=minbase --components=main --cache-dir="$VM_CACHE_ROOT/debs" \
	--include="$(IFS=,; echo "${PACKAGES[*]}")" "$VM_SUITE" "$ROOT" "$MIRROR" >"$TMP/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$TMP/debootstrap.log" >&2; die "debootstrap failed (log: $TMP/debootstrap.log)"; }

log "installing Debian's kernel and initramfs in the guest"
mnt -t proc proc "$ROOT/proc"
mnt -t sysfs sysfs "$ROOT/sys"
mnt --bind /dev "$ROOT/dev"
mnt --bind /dev/pts "$ROOT/dev/pts"
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d" # start nothing in the chroot
chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
{ in_root apt-get update -qq && in_root apt-get install -y -qq --no-install-recommends linux-image-amd64 initramfs-tools zstd; } \
	>"$TMP/kernel.log" 2>&1 || { tail -n 30 "$TMP/kernel.log" >&2; die "installing linux-image-amd64 in the guest failed"; }

log "configuring the guest"
echo "$VM_HOSTNAME" >"$ROOT/etc/hostname"
cat >"$ROOT/etc/hosts" <<HOSTS
127.0.0.1 localhost
::1 localhost ip6-localhost ip6-loopback
ff02::1 ip6-allnodes
ff02::2 ip6-allrouters
HOSTS
# No DNS in the guest: it reaches only the host, by address.
echo "# no DNS in the test bed's guest" >"$ROOT/etc/resolv.conf"
cat >"$ROOT/etc/fstab" <<'FSTAB'
/dev/vda  /  ext4  rw,errors=remount-ro  0 1
# Off at boot: `swapon /swapfile` (the swap tests turn it on).
/swapfile  none  swap  sw,noauto  0 0
FSTAB
# A fixed machine ID: no first-boot logic, and every boot of this image is
# the same machine.
tr -d '-' </proc/sys/kernel/random/uuid >"$ROOT/etc/machine-id"
mkdir -p "$ROOT/var/log/journal" "$ROOT/etc/systemd/network"
# Kubernetes' kernel settings (kubeadm's preflight checks them).
printf 'overlay\nbr_netfilter\n' >"$ROOT/etc/modules-load.d/kubernetes.conf"
cat >"$ROOT/etc/sysctl.d/90-kubernetes.conf" <<'SYSCTL'
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
SYSCTL
# ssh: root with the image's key only.
mkdir -p "$TMP/ssh" "$ROOT/root/.ssh"
ssh-keygen -q -t ed25519 -N '' -C "root@$VM_HOSTNAME-test-bed" -f "$TMP/ssh/id_ed25519"
install -m 0600 "$TMP/ssh/id_ed25519.pub" "$ROOT/root/.ssh/authorized_keys"
chmod 0700 "$ROOT/root/.ssh"
cat >"$ROOT/etc/ssh/sshd_config.d/nodelet.conf" <<'SSHD'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
SSHD
[ -f "$ROOT/etc/ssh/ssh_host_ed25519_key.pub" ] || in_root ssh-keygen -A >/dev/null
echo "$VM_HOSTNAME $(cut -d' ' -f1,2 "$ROOT/etc/ssh/ssh_host_ed25519_key.pub")" >"$TMP/ssh/known_hosts"
# Units: networkd configures the NIC (its .network file comes with vm-up);
# the periodic jobs that would only burn an emulated CPU are masked.
in_root systemctl enable systemd-networkd.service >/dev/null 2>&1
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
	ln -sf /dev/null "$ROOT/etc/systemd/system/$u"
done
in_root dpkg-query -W -f='${Package} ${Version}\n' >"$TMP/packages.txt"
rm -f "$ROOT/usr/sbin/policy-rc.d"
in_root apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin
cleanup

kver=$(cd "$ROOT/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -n1)
[ -n "$kver" ] && [ -f "$ROOT/boot/initrd.img-$kver" ] || die "no kernel or initrd in the guest's /boot"
cp "$ROOT/boot/vmlinuz-$kver" "$TMP/vmlinuz"
cp "$ROOT/boot/initrd.img-$kver" "$TMP/initrd.img"
echo "$kver" >"$TMP/kernel-version"

log "making the disk image ($DISK_SIZE, sparse) with mkfs.ext4 -d"
mkfs.ext4 -q -F -L nodelet-root -E lazy_itable_init=0,lazy_journal_init=0 -d "$ROOT" "$TMP/disk.img" "$DISK_SIZE" >&2 ||
	die "mkfs.ext4 -d failed"
# The swap file is written through a loop mount: mkfs.ext4 -d would store a
# file of zeros as a hole, and swapon refuses files with holes.
mnt -o loop "$TMP/disk.img" "$MNT"
dd if=/dev/zero of="$MNT/swapfile" bs=1M count="$SWAP_MIB" status=none
chmod 0600 "$MNT/swapfile"
mkswap -q "$MNT/swapfile" >/dev/null
cleanup
rm -rf "$ROOT" "$MNT"
echo $(($(date +%s) - start)) >"$TMP/build-seconds"
touch "$TMP/done"
mv "$TMP" "$IMG"
log "image $IMG built in $(cat "$IMG/build-seconds")s ($(du -sh --apparent-size "$IMG/disk.img" | cut -f1) apparent, $(du -sh "$IMG/disk.img" | cut -f1) on disk)"
echo "$IMG"
