#!/usr/bin/env bash
# overlay.sh ROOT: puts what runs on top of the base image into the guest's
# root file system at ROOT (the run disk, loop-mounted by up.sh before boot):
#   /usr/local/bin/{containerd,containerd-shim-runc-v2,ctr,crictl}, /usr/local/sbin/runc (hack/vm/runtime-build.sh)
#   /etc/containerd/config.toml       CRI plugin, runc with SystemdCgroup = true, CNI from /usr/lib/cni
#   /etc/containerd/certs.d/          every registry pulled from the host's local one (127.0.0.1:35000 in the guest)
#   containerd.service                upstream's unit (containerd v2.4.2's containerd.service), enabled
#   /etc/cni/net.d/10-containerd-net.conflist  bridge cni0 + portmap, host-local VM_POD_SUBNET
#   /etc/crictl.yaml
#   /etc/systemd/network/10-nodelet-vm.network  VM_GUEST_IP, default route via the host (which drops what it would forward)
#   nodelet-forward-PORT.socket/.service  127.0.0.1:PORT in the guest -> VM_HOST_IP:PORT (systemd-socket-proxyd)
#   /etc/nodelet-test-bed.env         the bed's addresses, for scripts in the guest
# Expects VM_CONTAINERD_BIN, VM_CTR, VM_RUNC and VM_CRICTL (runtime-build.sh's output) in the environment.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
R=${1:?usage: overlay.sh ROOT}
: "${VM_CONTAINERD_BIN:?}" "${VM_CTR:?}" "${VM_RUNC:?}" "${VM_CRICTL:?}"
[ -d "$R/etc/systemd" ] || die "$R is not the guest's root file system"

install -D -m 0755 "$VM_CONTAINERD_BIN/containerd" "$R/usr/local/bin/containerd"
install -D -m 0755 "$VM_CONTAINERD_BIN/containerd-shim-runc-v2" "$R/usr/local/bin/containerd-shim-runc-v2"
install -D -m 0755 "$VM_CTR" "$R/usr/local/bin/ctr"
install -D -m 0755 "$VM_CRICTL" "$R/usr/local/bin/crictl"
install -D -m 0755 "$VM_RUNC" "$R/usr/local/sbin/runc"

mkdir -p "$R/etc/containerd" "$R/etc/cni/net.d" "$R/etc/systemd/system/multi-user.target.wants" \
	"$R/etc/systemd/system/sockets.target.wants" "$R/etc/systemd/network"
cat >"$R/etc/containerd/config.toml" <<TOML
# The test bed's containerd (hack/vm/overlay.sh): a kubeadm-style node.
version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$PAUSE_IMAGE'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '/etc/containerd/certs.d'

[plugins.'io.containerd.cri.v1.runtime']
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/local/sbin/runc'
        SystemdCgroup = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '/etc/cni/net.d'
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
TOML

# Registries: everything from the host's local registry, as on the host's
# stack (hack/stack-up.sh); the private registry serves itself.
for h in _default docker.io registry.k8s.io; do
	mkdir -p "$R/etc/containerd/certs.d/$h"
	cat >"$R/etc/containerd/certs.d/$h/hosts.toml" <<TOML
# Every pull is served by the host's local registry (forwarded to the guest's 127.0.0.1).
server = "http://$REGISTRY_ADDR"

[host."http://$REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
TOML
done
mkdir -p "$R/etc/containerd/certs.d/$PRIVATE_REGISTRY_ADDR"
cat >"$R/etc/containerd/certs.d/$PRIVATE_REGISTRY_ADDR/hosts.toml" <<TOML
server = "http://$PRIVATE_REGISTRY_ADDR"

[host."http://$PRIVATE_REGISTRY_ADDR"]
  capabilities = ["pull", "resolve"]
TOML

# Upstream's unit (containerd v2.4.2's containerd.service, its comments left out).
cat >"$R/etc/systemd/system/containerd.service" <<'UNIT'
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd

Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
UNIT
ln -sf /etc/systemd/system/containerd.service "$R/etc/systemd/system/multi-user.target.wants/containerd.service"

cat >"$R/etc/cni/net.d/10-containerd-net.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "containerd-net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$VM_POD_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "promiscMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$VM_POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
JSON

cat >"$R/etc/crictl.yaml" <<'YAML'
runtime-endpoint: unix:///run/containerd/containerd.sock
image-endpoint: unix:///run/containerd/containerd.sock
timeout: 10
YAML

cat >"$R/etc/systemd/network/10-nodelet-vm.network" <<NET
[Match]
MACAddress=$VM_MAC

[Network]
Address=$VM_GUEST_IP/$VM_PREFIX
# The host: it answers on $VM_HOST_IP and drops whatever it would forward.
Gateway=$VM_HOST_IP
LinkLocalAddressing=no
IPv6AcceptRA=no
NET

cat >"$R/etc/hosts" <<HOSTS
127.0.0.1 localhost
$VM_GUEST_IP $VM_HOSTNAME
::1 localhost ip6-localhost ip6-loopback
ff02::1 ip6-allnodes
ff02::2 ip6-allrouters
HOSTS

# The host's API server and registries listen on its 127.0.0.1 only: the guest
# reaches them on its own 127.0.0.1 (so the API server's certificate and the
# registry names hold), through systemd-socket-proxyd to the host's forwards.
for p in $VM_FORWARD_PORTS; do
	cat >"$R/etc/systemd/system/nodelet-forward-$p.socket" <<UNIT
[Unit]
Description=127.0.0.1:$p forwarded to the test bed's host ($VM_HOST_IP:$p)

[Socket]
ListenStream=127.0.0.1:$p

[Install]
WantedBy=sockets.target
UNIT
	cat >"$R/etc/systemd/system/nodelet-forward-$p.service" <<UNIT
[Unit]
Description=127.0.0.1:$p forwarded to the test bed's host ($VM_HOST_IP:$p)
Requires=nodelet-forward-$p.socket
After=nodelet-forward-$p.socket

[Service]
ExecStart=/usr/lib/systemd/systemd-socket-proxyd $VM_HOST_IP:$p
UNIT
	ln -sf "/etc/systemd/system/nodelet-forward-$p.socket" "$R/etc/systemd/system/sockets.target.wants/nodelet-forward-$p.socket"
done

cat >"$R/etc/nodelet-test-bed.env" <<ENV
# The real-node test bed (hack/vm/): the guest's view.
NODE_NAME=$VM_HOSTNAME
NODE_IP=$VM_GUEST_IP
HOST_IP=$VM_HOST_IP
FORWARDED_PORTS="$VM_FORWARD_PORTS"
API_SERVER=https://127.0.0.1:6443
REGISTRY=$REGISTRY_ADDR
PRIVATE_REGISTRY=$PRIVATE_REGISTRY_ADDR
PAUSE_IMAGE=$PAUSE_IMAGE
ENV
