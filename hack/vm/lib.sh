# shellcheck shell=bash
# Settings of the real-node test bed (a Debian 12 guest under qemu). Sourced
# by the scripts in hack/vm/, never run. Every setting can be overridden from
# the environment. See docs/real-node.md.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

VM_DIR="${VM_DIR:-$STACK_DIR/vm}"                   # the running guest's state: disk, console log, pidfile
VM_CACHE_ROOT="${VM_CACHE_ROOT:-$REPO_ROOT/.cache/vm}" # base images, one directory per recipe hash
VM_SUITE="${VM_SUITE:-bookworm}"
VM_HOSTNAME="nodelet-vm"
VM_SMP="${VM_SMP:-2}"
VM_MEM="${VM_MEM:-3072}"                 # MiB
VM_NUMA="${VM_NUMA:-1}"                  # NUMA nodes: VM_SMP CPUs and VM_MEM split evenly among them
VM_BOOT_TIMEOUT="${VM_BOOT_TIMEOUT:-300}" # seconds from qemu's start until ssh answers
VM_DOWN_TIMEOUT="${VM_DOWN_TIMEOUT:-60}"  # seconds for a clean power-off before qemu is killed
VM_ACCEL="${VM_ACCEL:-auto}"              # auto, kvm or tcg
# The network: a host bridge with a tap device for the guest, private addresses.
VM_BRIDGE="${VM_BRIDGE:-nodelet-br0}"
VM_TAP="${VM_TAP:-nodelet-tap0}"
VM_HOST_IP="${VM_HOST_IP:-10.213.0.1}"
VM_GUEST_IP="${VM_GUEST_IP:-10.213.0.2}"
VM_PREFIX="${VM_PREFIX:-24}"
VM_SUBNET="${VM_SUBNET:-10.213.0.0/24}"
VM_MAC="${VM_MAC:-52:54:00:d5:00:02}"
# The guest's pods (bridge CNI inside the guest).
VM_POD_BRIDGE="cni0"
VM_POD_SUBNET="${VM_POD_SUBNET:-10.214.0.0/16}"
# Host services listening on 127.0.0.1 that the guest reaches on its own
# 127.0.0.1 (same port): the API server and the stack's two registries.
VM_FORWARD_PORTS="${VM_FORWARD_PORTS:-6443 35000 35001}"
# What runs in the guest, built from the Go module proxy on the host.
VM_CONTAINERD_VERSION="$CONTAINERD2_VERSION"

VM_PIDFILE="$VM_DIR/qemu.pid"
VM_CONSOLE="$VM_DIR/console.log"
VM_MONITOR="$VM_DIR/monitor.sock"
VM_DISK="$VM_DIR/disk.img"
VM_SSH_CTL="$VM_DIR/ssh.ctl"
# The image the guest booted from (written by up.sh): its directory holds the
# ssh key and the guest's host key.
VM_IMAGE_LINK="$VM_DIR/image"

VM_HOST_PKGS=(qemu-system-x86 qemu-utils debootstrap socat e2fsprogs iptables iproute2 openssh-client libseccomp-dev pkg-config gcc libc6-dev python3)

# vm_install_packages: installs the host's packages the bed needs when
# missing; a failed install fails (with CI=true or not: nothing works without them).
vm_install_packages() {
	local missing=() p
	for p in "${VM_HOST_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
		die "the test bed needs ${missing[*]} (Debian packages) and apt-get install failed${CI:+ (CI=true: not skipped)}"
	fi
	for p in qemu-system-x86_64 debootstrap socat mkfs.ext4; do
		command -v "$p" >/dev/null || die "$p is still missing after installing ${missing[*]}"
	done
}

# vm_image_dir: the cache directory of the current recipe (which may not be
# built yet): .cache/vm/<first 16 hex digits of sha256 of hack/vm/image.sh and the suite>.
vm_image_dir() {
	local key
	key=$({ cat "$REPO_ROOT/hack/vm/image.sh"; echo "suite=$VM_SUITE"; } | sha256sum | cut -c1-16)
	echo "$VM_CACHE_ROOT/$key"
}

# vm_ssh_opts: ssh options for the guest (the key and the pinned host key of
# the image it booted from, a control master for fast repeated commands).
vm_ssh_opts() {
	local img
	img=$(readlink -f "$VM_IMAGE_LINK" 2>/dev/null) || true
	[ -n "$img" ] && [ -f "$img/ssh/id_ed25519" ] || die "no guest: run make vm-up first"
	printf '%s\n' -i "$img/ssh/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes \
		-o HostKeyAlias="$VM_HOSTNAME" -o UserKnownHostsFile="$img/ssh/known_hosts" -o StrictHostKeyChecking=yes \
		-o ConnectTimeout=5 -o ServerAliveInterval=5 -o ServerAliveCountMax=6 -o LogLevel=ERROR \
		-o ControlMaster=auto -o ControlPath="$VM_SSH_CTL" -o ControlPersist=120
}

# vm_ssh CMD...: runs CMD in the guest as root.
vm_ssh() {
	local opts
	mapfile -t opts < <(vm_ssh_opts)
	ssh "${opts[@]}" "root@$VM_GUEST_IP" -- "$@"
}

# pid_is FILE WORD: FILE names a running process whose command line holds
# WORD (a stale pidfile whose number was reused is not ours).
pid_is() { pid_alive "$1" && tr '\0' ' ' <"/proc/$(cat "$1")/cmdline" 2>/dev/null | grep -qF -- "$2"; }

# vm_running: qemu runs the guest of this VM_DIR.
vm_running() { pid_is "$VM_PIDFILE" "$VM_DISK"; }

# vm_console_tail [N]: the last N lines of the guest's serial console.
vm_console_tail() {
	local n=${1:-40}
	if [ -s "$VM_CONSOLE" ]; then
		log "last $n lines of the guest's console ($VM_CONSOLE):"
		tail -n "$n" "$VM_CONSOLE" | tr -d '\r' | sed 's/\x1b\[[0-9;]*[a-zA-Z]//g' >&2
	else
		log "the guest's console ($VM_CONSOLE) is empty: the kernel printed nothing"
	fi
}

# The host's side of the network: bridge VM_BRIDGE with VM_HOST_IP, the
# guest's tap device on it, and FORWARD drops so that nothing from the guest
# goes past the host (the guest's default route points at the host, whose
# ip_forward may be on). Idempotent.
vm_net_up() {
	ip link show "$VM_BRIDGE" >/dev/null 2>&1 || ip link add "$VM_BRIDGE" type bridge ||
		die "cannot create the bridge $VM_BRIDGE (ip link add type bridge)"
	[[ "$(ip -o addr show dev "$VM_BRIDGE")" == *"inet $VM_HOST_IP/"* ]] || ip addr add "$VM_HOST_IP/$VM_PREFIX" dev "$VM_BRIDGE"
	ip link set "$VM_BRIDGE" up
	ip link show "$VM_TAP" >/dev/null 2>&1 || ip tuntap add dev "$VM_TAP" mode tap ||
		die "cannot create the tap device $VM_TAP (ip tuntap; is /dev/net/tun there?)"
	ip link set "$VM_TAP" master "$VM_BRIDGE"
	ip link set "$VM_TAP" up
	if command -v iptables >/dev/null; then
		iptables -C FORWARD -s "$VM_SUBNET" ! -d "$VM_SUBNET" -j DROP 2>/dev/null ||
			iptables -I FORWARD -s "$VM_SUBNET" ! -d "$VM_SUBNET" -j DROP
		iptables -C FORWARD -d "$VM_SUBNET" ! -s "$VM_SUBNET" -j DROP 2>/dev/null ||
			iptables -I FORWARD -d "$VM_SUBNET" ! -s "$VM_SUBNET" -j DROP
	fi
}

vm_net_down() {
	ip link del "$VM_TAP" 2>/dev/null || true
	ip link del "$VM_BRIDGE" 2>/dev/null || true
	if command -v iptables >/dev/null; then
		while iptables -D FORWARD -s "$VM_SUBNET" ! -d "$VM_SUBNET" -j DROP 2>/dev/null; do :; done
		while iptables -D FORWARD -d "$VM_SUBNET" ! -s "$VM_SUBNET" -j DROP 2>/dev/null; do :; done
	fi
}

# The forwards from VM_HOST_IP:PORT to 127.0.0.1:PORT (socat, one process
# group each; the guest forwards its own 127.0.0.1:PORT here).
vm_forwards_up() {
	local p pidf
	mkdir -p "$VM_DIR"
	for p in $VM_FORWARD_PORTS; do
		pidf="$VM_DIR/forward-$p.pid"
		pid_is "$pidf" "bind=$VM_HOST_IP" && continue
		setsid socat "TCP-LISTEN:$p,bind=$VM_HOST_IP,reuseaddr,fork" "TCP:127.0.0.1:$p" \
			>"$VM_DIR/forward-$p.log" 2>&1 </dev/null &
		echo $! >"$pidf"
	done
	sleep 0.2
	for p in $VM_FORWARD_PORTS; do
		pid_is "$VM_DIR/forward-$p.pid" "bind=$VM_HOST_IP" || { cat "$VM_DIR/forward-$p.log" >&2; die "the forward $VM_HOST_IP:$p -> 127.0.0.1:$p (socat) did not start"; }
	done
}

vm_forwards_down() {
	local f pid
	for f in "$VM_DIR"/forward-*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		# socat forks a child per connection in its process group (setsid).
		if pid_is "$f" "bind=$VM_HOST_IP"; then
			kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
	done
}
