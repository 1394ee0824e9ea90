#!/usr/bin/env bash
# stack-up: installs what is missing and starts the local test stack:
# a loopback registry serving the test images, a CNI bridge network, and a
# private containerd. Idempotent: what already runs is kept. Writes .stack/env.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

PKGS=(containerd runc crun containernetworking-plugins busybox-static iptables iproute2 gcc libc6-dev curl)
install_packages() {
	local missing=()
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

# The network: a bridge with a gateway address (a non-loopback address for the
# node), host-local IPAM with a private data dir, and a FORWARD drop so that
# nothing from pods leaves the host.
setup_network() {
	mkdir -p "$STACK_DIR/cni/net.d" "$STACK_DIR/cni/networks"
	if ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
		ip link add "$CNI_BRIDGE" type bridge
	fi
	[[ "$(ip -o addr show dev "$CNI_BRIDGE")" == *"inet $CNI_GATEWAY/"* ]] ||
		ip addr add "$CNI_GATEWAY/${CNI_SUBNET#*/}" dev "$CNI_BRIDGE"
	ip link set "$CNI_BRIDGE" up
	iptables -C FORWARD -s "$CNI_SUBNET" ! -d "$CNI_SUBNET" -j DROP 2>/dev/null ||
		iptables -I FORWARD -s "$CNI_SUBNET" ! -d "$CNI_SUBNET" -j DROP
	cat >"$STACK_DIR/cni/net.d/10-nodelet.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "nodelet",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STACK_DIR/cni/networks",
        "ranges": [[{"subnet": "$CNI_SUBNET", "gateway": "$CNI_GATEWAY"}]],
        "routes": [{"dst": "$CNI_SUBNET"}]
      }
    }
  ]
}
JSON
}

registry_ready() {
	curl -fsS -o /dev/null "http://$REGISTRY_ADDR/v2/library/busybox/manifests/1.36" 2>/dev/null &&
		curl -fsS -o /dev/null "http://$REGISTRY_ADDR/v2/nodelet/grpc-health/manifests/1.0" 2>/dev/null
}

start_registry() {
	if pid_alive "$REGISTRY_PID" && registry_ready; then return 0; fi
	# An older registry of this stack (without every image): replace it.
	if pkill -f "^$STACK_DIR/bin/testregistry " 2>/dev/null; then
		sleep 0.5
	fi
	mkdir -p "$STACK_DIR/registry" "$STACK_DIR/bin"
	log "building the test images and registry"
	gcc -Os -static -s -o "$STACK_DIR/bin/pause" "$REPO_ROOT/hack/images/pause.c" || die "building pause failed"
	(cd "$REPO_ROOT" && go build -o "$STACK_DIR/bin/testregistry" ./hack/tools/testregistry) || die "building testregistry failed"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$STACK_DIR/bin/grpc-health" ./hack/images/grpc-health) || die "building grpc-health failed"
	rm -f "$STACK_DIR/registry/ready"
	setsid "$STACK_DIR/bin/testregistry" --addr "$REGISTRY_ADDR" --pause "$STACK_DIR/bin/pause" \
		--busybox /bin/busybox --grpc-health "$STACK_DIR/bin/grpc-health" --ready-file "$STACK_DIR/registry/ready" \
		>"$STACK_DIR/registry/registry.log" 2>&1 </dev/null &
	echo $! >"$REGISTRY_PID"
	for _ in $(seq 100); do
		[ -f "$STACK_DIR/registry/ready" ] && registry_ready && { log "registry serving on $REGISTRY_ADDR"; return 0; }
		pid_alive "$REGISTRY_PID" || break
		sleep 0.1
	done
	cat "$STACK_DIR/registry/registry.log" >&2
	die "the registry did not start"
}

write_containerd_config() {
	local d="$CONTAINERD_DIR"
	mkdir -p "$d/root" "$d/state" "$d/runc" "$STACK_DIR/certs.d/_default" "$STACK_DIR/certs.d/docker.io" "$STACK_DIR/certs.d/registry.k8s.io"
	for h in _default docker.io registry.k8s.io; do
		cat >"$STACK_DIR/certs.d/$h/hosts.toml" <<TOML
# Every pull is served by the local registry: a missing image fails here.
server = "http://$REGISTRY_ADDR"

[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
TOML
	done
	cat >"$d/config.toml" <<TOML
version = 2
root = "$d/root"
state = "$d/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  systemd_cgroup = false
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$d/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STACK_DIR/cni/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$STACK_DIR/certs.d"
TOML
}

containerd_ready() {
	ctr --connect-timeout 1s --address "$CONTAINERD_SOCK" version >/dev/null 2>&1
}

start_containerd() {
	if pid_alive "$CONTAINERD_PID" && containerd_ready; then return 0; fi
	write_containerd_config
	log "starting containerd"
	setsid containerd --config "$CONTAINERD_DIR/config.toml" >"$CONTAINERD_DIR/containerd.log" 2>&1 </dev/null &
	echo $! >"$CONTAINERD_PID"
	for _ in $(seq 100); do
		containerd_ready && { log "containerd ready on $CONTAINERD_SOCK"; return 0; }
		pid_alive "$CONTAINERD_PID" || break
		sleep 0.1
	done
	tail -n 30 "$CONTAINERD_DIR/containerd.log" >&2
	die "containerd did not start"
}

# Pre-pull the pause image so that the first sandbox does not pay for it.
prepull() {
	ctr --connect-timeout 1s --address "$CONTAINERD_SOCK" -n k8s.io images pull --hosts-dir "$STACK_DIR/certs.d" \
		"$PAUSE_IMAGE" >/dev/null || die "pulling $PAUSE_IMAGE from the local registry failed"
}

# crictl, the operator's CRI client, built from the Go module proxy.
install_crictl() {
	mkdir -p "$STACK_DIR/bin"
	if [ ! -x "$STACK_DIR/bin/crictl" ]; then
		log "building crictl $CRICTL_VERSION"
		GOBIN="$STACK_DIR/bin" go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" || die "building crictl failed"
	fi
	cat >"$STACK_DIR/crictl.yaml" <<YAML
runtime-endpoint: unix://$CONTAINERD_SOCK
image-endpoint: unix://$CONTAINERD_SOCK
timeout: 10
YAML
}

write_env() {
	cat >"$STACK_DIR/env" <<ENV
# Written by make stack-up. Source it: . .stack/env
export STACK_DIR="$STACK_DIR"
export CONTAINER_RUNTIME_ENDPOINT="unix://$CONTAINERD_SOCK"
export IMAGE_SERVICE_ENDPOINT="unix://$CONTAINERD_SOCK"
export REGISTRY="$REGISTRY_ADDR"
export PAUSE_IMAGE="$PAUSE_IMAGE"
export BUSYBOX_IMAGE="$BUSYBOX_IMAGE"
export CNI_BRIDGE="$CNI_BRIDGE"
export CNI_SUBNET="$CNI_SUBNET"
export NODE_IP="$CNI_GATEWAY"
export CRI_CONFIG_FILE="$STACK_DIR/crictl.yaml"
export CRICTL="$STACK_DIR/bin/crictl"
ENV
}

mkdir -p "$STACK_DIR"
install_packages
command -v go >/dev/null || die "go is not installed (expected at /usr/local/go/bin)"
setup_network
start_registry
start_containerd
prepull
install_crictl
write_env
log "stack up: source $STACK_DIR/env"
