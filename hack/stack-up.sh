#!/usr/bin/env bash
# stack-up: installs what is missing and starts the local test stack:
# a loopback registry serving the test images, a private registry with
# basic auth, a CNI bridge network, and a private containerd: containerd 2
# with runc, both built from the Go module proxy (STACK_RUNTIME=containerd2,
# the default), or Debian's containerd 1.6 (STACK_RUNTIME=containerd1).
# Idempotent: what already runs is kept; switching the runtime removes the
# pods of the one running first. Writes .stack/env.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root

PKGS=(containerd runc crun containernetworking-plugins busybox-static iptables iproute2 gcc libc6-dev curl docker-registry apache2-utils dbus-daemon dbus-bin systemd e2fsprogs xfsprogs libseccomp-dev pkg-config)
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
		curl -fsS -o /dev/null "http://$REGISTRY_ADDR/v2/nodelet/grpc-health/manifests/1.0" 2>/dev/null &&
		# Tag lists are never delayed, only manifests.
		curl -fsS "http://$REGISTRY_ADDR/v2/slow/busybox/tags/list" 2>/dev/null | grep -q "\"$SLOW_IMAGE_COUNT\""
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
	(cd "$REPO_ROOT/test/fakes" && go build -o "$STACK_DIR/bin/testregistry" ./testregistry) || die "building testregistry failed"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$STACK_DIR/bin/grpc-health" ./hack/images/grpc-health) || die "building grpc-health failed"
	rm -f "$STACK_DIR/registry/ready"
	setsid "$STACK_DIR/bin/testregistry" --addr "$REGISTRY_ADDR" --pause "$STACK_DIR/bin/pause" \
		--busybox /bin/busybox --grpc-health "$STACK_DIR/bin/grpc-health" --ready-file "$STACK_DIR/registry/ready" \
		--slow-images "$SLOW_IMAGE_COUNT" --slow-delay "$SLOW_IMAGE_DELAY" \
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

private_password() { cat "$PRIVATE_REGISTRY_DIR/password"; }

# The private image answers with the credentials, and not without them.
private_registry_ready() {
	local accept="application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
	curl -fsS -o /dev/null -H "Accept: $accept" -u "$PRIVATE_REGISTRY_USER:$(private_password)" \
		"http://$PRIVATE_REGISTRY_ADDR/v2/private/busybox/manifests/1.36" 2>/dev/null &&
		[ "$(curl -sS -o /dev/null -w '%{http_code}' "http://$PRIVATE_REGISTRY_ADDR/v2/private/busybox/manifests/1.36" 2>/dev/null)" = 401 ]
}

# A docker-registry on PRIVATE_REGISTRY_ADDR that wants basic auth (htpasswd,
# a password generated once into .stack/private-registry/password), holding
# the busybox test image as PRIVATE_IMAGE. Plain HTTP: loopback only.
start_private_registry() {
	local d="$PRIVATE_REGISTRY_DIR"
	mkdir -p "$d/data" "$STACK_DIR/bin"
	if [ ! -s "$d/password" ]; then
		(umask 077 && head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$d/password")
	fi
	if pid_alive "$PRIVATE_REGISTRY_PID" && private_registry_ready; then return 0; fi
	# One of this stack that does not serve as expected: replace it.
	if pid_alive "$PRIVATE_REGISTRY_PID"; then
		kill "$(cat "$PRIVATE_REGISTRY_PID")" 2>/dev/null || true
		for _ in $(seq 50); do pid_alive "$PRIVATE_REGISTRY_PID" || break; sleep 0.1; done
	fi
	if ! pid_alive "$PRIVATE_REGISTRY_PID"; then
		htpasswd -iBc "$d/htpasswd" "$PRIVATE_REGISTRY_USER" <"$d/password" 2>/dev/null || die "htpasswd failed"
		cat >"$d/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $d/data
  delete:
    enabled: true
http:
  addr: $PRIVATE_REGISTRY_ADDR
  secret: $(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
auth:
  htpasswd:
    realm: nodelet-private
    path: $d/htpasswd
YAML
		log "starting the private registry"
		setsid docker-registry serve "$d/config.yml" >"$d/registry.log" 2>&1 </dev/null &
		echo $! >"$PRIVATE_REGISTRY_PID"
	fi
	local up=""
	for _ in $(seq 100); do
		[ "$(curl -sS -o /dev/null -w '%{http_code}' "http://$PRIVATE_REGISTRY_ADDR/v2/" 2>/dev/null)" = 401 ] && { up=1; break; }
		pid_alive "$PRIVATE_REGISTRY_PID" || break
		sleep 0.1
	done
	[ -n "$up" ] || { cat "$d/registry.log" >&2; die "the private registry did not start"; }
	(cd "$REPO_ROOT" && go build -o "$STACK_DIR/bin/imagecopy" ./hack/tools/imagecopy) || die "building imagecopy failed"
	"$STACK_DIR/bin/imagecopy" --src "$REGISTRY_ADDR/library/busybox:1.36" --dst "$PRIVATE_IMAGE" \
		--user "$PRIVATE_REGISTRY_USER" --password-file "$d/password" --label org.nodelet.test=private || die "pushing $PRIVATE_IMAGE failed"
	private_registry_ready || die "the private registry does not serve $PRIVATE_IMAGE as expected"
	log "private registry serving $PRIVATE_IMAGE (basic auth)"
}

# Registry hosts for containerd, read at every pull (so rewritten on every
# run, containerd running or not). docker.io, registry.k8s.io and every other
# registry go to the local one, so a missing image fails locally; the
# private registry is served by itself.
write_registry_hosts() {
	local h
	mkdir -p "$STACK_DIR/certs.d/_default" "$STACK_DIR/certs.d/docker.io" "$STACK_DIR/certs.d/registry.k8s.io" \
		"$STACK_DIR/certs.d/$PRIVATE_REGISTRY_ADDR"
	for h in _default docker.io registry.k8s.io; do
		cat >"$STACK_DIR/certs.d/$h/hosts.toml" <<TOML
# Every pull is served by the local registry: a missing image fails here.
server = "http://$REGISTRY_ADDR"

[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
TOML
	done
	cat >"$STACK_DIR/certs.d/$PRIVATE_REGISTRY_ADDR/hosts.toml" <<TOML
# The private registry (basic auth over plain HTTP, loopback) serves itself.
server = "http://$PRIVATE_REGISTRY_ADDR"

[host."http://$PRIVATE_REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
TOML
}

# The runtime's binaries: containerd, its ctr and runc.
runtime_bins() {
	case $STACK_RUNTIME in
	containerd2)
		CONTAINERD2_BIN=$(bash "$REPO_ROOT/hack/containerd2-build.sh") || die "building containerd $CONTAINERD2_VERSION failed"
		wrapper_build ctr github.com/containerd/containerd/v2 "$CONTAINERD2_VERSION" github.com/containerd/containerd/v2/cmd/ctr \
			"$REPO_ROOT/.cache/ctr/$CONTAINERD2_VERSION" "-s -w"
		RUNC_BIN=$(bash "$REPO_ROOT/hack/runc-build.sh") || die "building runc $RUNC_VERSION failed"
		CONTAINERD_BIN="$CONTAINERD2_BIN/containerd" SECOND_HANDLER=runc-debian
		CTR_BIN="$REPO_ROOT/.cache/ctr/$CONTAINERD2_VERSION/bin/ctr"
		;;
	containerd1)
		# containerd v2 still built: the tests of what only it has run
		# their own.
		CONTAINERD2_BIN=$(bash "$REPO_ROOT/hack/containerd2-build.sh") || die "building containerd $CONTAINERD2_VERSION failed"
		CONTAINERD_BIN=/usr/bin/containerd CTR_BIN=/usr/bin/ctr RUNC_BIN=/usr/sbin/runc SECOND_HANDLER=crun
		;;
	*) die "STACK_RUNTIME=$STACK_RUNTIME: containerd2 (the default) or containerd1" ;;
	esac
}

write_containerd_config() {
	case $STACK_RUNTIME in
	containerd2) write_containerd2_config ;;
	containerd1) write_containerd1_config ;;
	esac
}

# containerd 2 (configuration version 3): its own root and state, so that
# switching runtimes never hands one's metadata to the other.
write_containerd2_config() {
	local d="$CONTAINERD_DIR" r="$CONTAINERD_DIR/v2"
	mkdir -p "$r/root" "$r/state" "$r/runc" "$r/runc-debian" "$d/cdi"
	cat >"$d/config.toml" <<TOML
# STACK_RUNTIME=containerd2: containerd $CONTAINERD2_VERSION, runc $RUNC_VERSION (hack/stack-up.sh)
version = 3
root = "$r/root"
state = "$r/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[metrics]
  address = "$CONTAINERD_METRICS_ADDR"

[plugins."io.containerd.internal.v1.opt"]
  path = "$r/opt"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$STACK_DIR/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  disable_hugetlb_controller = false
  tolerate_missing_hugetlb_controller = true
  enable_cdi = true
  cdi_spec_dirs = ["$d/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$RUNC_BIN"
        Root = "$r/runc"
        SystemdCgroup = false
    # A second handler for RuntimeClass: Debian's runc 1.1.5 (Debian's crun
    # 1.8 refuses containerd 2's OCI spec version).
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc-debian]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc-debian.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$r/runc-debian"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STACK_DIR/cni/net.d"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
TOML
}

# Debian's containerd 1.6 (configuration version 2).
write_containerd1_config() {
	local d="$CONTAINERD_DIR"
	mkdir -p "$d/root" "$d/state" "$d/runc"
	cat >"$d/config.toml" <<TOML
# STACK_RUNTIME=containerd1: Debian's containerd 1.6 (hack/stack-up.sh)
version = 2
root = "$d/root"
state = "$d/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[metrics]
  address = "$CONTAINERD_METRICS_ADDR"

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  systemd_cgroup = false
  disable_hugetlb_controller = false
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

    # A second handler for RuntimeClass: crun.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]
        BinaryName = "/usr/bin/crun"
        Root = "$d/crun"
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
	"$CTR_BIN" --connect-timeout 1s --address "$CONTAINERD_SOCK" version >/dev/null 2>&1
}

# crun refuses to run when the hugetlb controller exists but its cgroup v1
# hierarchy is not mounted (as on this Debian host): mount it.
mount_hugetlb() {
	[ -d /sys/fs/cgroup/cpu ] || return 0 # cgroup v2 only: nothing to mount
	grep -qw hugetlb /proc/cgroups || return 0
	mountpoint -q /sys/fs/cgroup/hugetlb && return 0
	if [ ! -d /sys/fs/cgroup/hugetlb ]; then
		# /sys/fs/cgroup is often a read-only tmpfs.
		mkdir /sys/fs/cgroup/hugetlb 2>/dev/null || { mount -o remount,rw /sys/fs/cgroup && mkdir /sys/fs/cgroup/hugetlb; } ||
			die "cannot create /sys/fs/cgroup/hugetlb"
	fi
	mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb || die "cannot mount the hugetlb cgroup controller"
	log "mounted the hugetlb cgroup controller (crun needs it)"
}

start_containerd() {
	mount_hugetlb
	if pid_alive "$CONTAINERD_PID" && containerd_ready; then
		# A changed configuration (a new runtime handler...) needs a restart;
		# running pods keep running (their shims do not depend on it).
		local old
		old=$(cat "$CONTAINERD_DIR/config.toml" 2>/dev/null)
		write_containerd_config
		[ "$old" = "$(cat "$CONTAINERD_DIR/config.toml")" ] && return 0
		if [ "$(sed -n '1s/^# STACK_RUNTIME=\([a-z0-9]*\):.*/\1/p' <<<"$old")" != "$STACK_RUNTIME" ]; then
			# Another runtime: its pods go first (the new one would never
			# know of them).
			log "switching the runtime to $STACK_RUNTIME: removing the pods of the running one"
			CONTAINER_RUNTIME_ENDPOINT="unix://$CONTAINERD_SOCK" "$STACK_DIR/bin/crictl" --timeout 60s rmp -fa >/dev/null 2>&1 || true
		fi
		log "containerd configuration changed: restarting containerd"
		kill "$(cat "$CONTAINERD_PID")"
		for _ in $(seq 50); do pid_alive "$CONTAINERD_PID" || break; sleep 0.1; done
	fi
	write_containerd_config
	log "starting containerd ($STACK_RUNTIME: $CONTAINERD_BIN)"
	# PATH: containerd 2 runs its own runc shim, not Debian's.
	PATH="$(dirname "$CONTAINERD_BIN"):$PATH" setsid "$CONTAINERD_BIN" --config "$CONTAINERD_DIR/config.toml" \
		>"$CONTAINERD_DIR/containerd.log" 2>&1 </dev/null &
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
	"$CTR_BIN" --connect-timeout 1s --address "$CONTAINERD_SOCK" -n k8s.io images pull --hosts-dir "$STACK_DIR/certs.d" \
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
	# cluster-up's block (hack/cluster/up.sh) is kept: the control plane
	# still runs.
	local cluster=""
	[ -f "$STACK_DIR/env" ] && cluster=$(sed -n '/^# cluster-up begin/,/^# cluster-up end/p' "$STACK_DIR/env")
	cat >"$STACK_DIR/env.new" <<ENV
# Written by make stack-up. Source it: . .stack/env
export STACK_DIR="$STACK_DIR"
export CONTAINER_RUNTIME_ENDPOINT="unix://$CONTAINERD_SOCK"
export CONTAINERD_METRICS="http://$CONTAINERD_METRICS_ADDR/v1/metrics"
export IMAGE_SERVICE_ENDPOINT="unix://$CONTAINERD_SOCK"
export REGISTRY="$REGISTRY_ADDR"
export PAUSE_IMAGE="$PAUSE_IMAGE"
export BUSYBOX_IMAGE="$BUSYBOX_IMAGE"
export CNI_BRIDGE="$CNI_BRIDGE"
export CNI_SUBNET="$CNI_SUBNET"
export NODE_IP="$CNI_GATEWAY"
export CRI_CONFIG_FILE="$STACK_DIR/crictl.yaml"
export CRICTL="$STACK_DIR/bin/crictl"
export SLOW_IMAGE_REPO="$REGISTRY_ADDR/slow/busybox"
export SLOW_IMAGE_COUNT="$SLOW_IMAGE_COUNT"
export SLOW_IMAGE_DELAY="$SLOW_IMAGE_DELAY"
export PRIVATE_REGISTRY="$PRIVATE_REGISTRY_ADDR"
export PRIVATE_REGISTRY_USER="$PRIVATE_REGISTRY_USER"
export PRIVATE_REGISTRY_PASSWORD="$(private_password)"
export PRIVATE_IMAGE="$PRIVATE_IMAGE"
export CONTAINERD2_BIN="$CONTAINERD2_BIN"
export STACK_RUNTIME="$STACK_RUNTIME"
export CONTAINERD="$CONTAINERD_BIN"
export CTR="$CTR_BIN"
export RUNC="$RUNC_BIN"
export SECOND_RUNTIME_HANDLER="$SECOND_HANDLER"
ENV
	[ -n "$cluster" ] && printf '%s\n' "$cluster" >>"$STACK_DIR/env.new"
	mv "$STACK_DIR/env.new" "$STACK_DIR/env"
}

mkdir -p "$STACK_DIR"
install_packages
command -v go >/dev/null || die "go is not installed (expected at /usr/local/go/bin)"
setup_network
start_registry
start_private_registry
write_registry_hosts
install_crictl
runtime_bins
start_containerd
prepull
write_env
log "stack up: source $STACK_DIR/env"
