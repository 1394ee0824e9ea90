#!/usr/bin/env bash
# cluster-up: a real control plane on 127.0.0.1 for the local stack: etcd,
# kube-apiserver (Node,RBAC authorization, NodeRestriction, bootstrap
# tokens), kube-controller-manager (fast node-monitor flags, CSR signing
# with 3-minute certificates, $CLUSTER_SIGNING_DURATION, so a rotation
# comes within two minutes) and kube-scheduler, built from the Go
# module proxy (hack/cluster/build.sh), with kubeadm's TLS bootstrap
# objects. Idempotent. Adds KUBECONFIG, NODE_NAME, NODE_KUBECONFIG,
# NODE_TLS_CERT, NODE_TLS_KEY, CLIENT_CA_FILE, BOOTSTRAP_KUBECONFIG,
# CLUSTER_SIGNING_DURATION, KUBECTL
# K8S_BIN, CSI_PROVISIONER and CSI_ATTACHER (hack/csi/build.sh) and
# METRICS_SERVER_BIN (hack/cluster/metrics-server-build.sh) and
# PROMETHEUS_BIN (hack/cluster/prometheus-build.sh) to .stack/env.
# The API server has the aggregation layer (front-proxy client, request
# header CA, aggregator routing to endpoints) for metrics-server.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
need_root
[ -f "$STACK_DIR/env" ] || bash "$REPO_ROOT/hack/stack-up.sh"
# shellcheck source=/dev/null
source "$STACK_DIR/env"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
K8S_BIN="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION/bin"
CL="$STACK_DIR/cluster"
PKI="$CL/pki"
NODE_NAME="${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}"
# How long certificates signed through CSRs live. The signer backdates them
# 5 minutes and agents renew at 70-90% of NotBefore..NotAfter: 3 minutes is
# the shortest whose renewal comes after the bootstrap (0.6-2.2 minutes on).
CLUSTER_SIGNING_DURATION="${CLUSTER_SIGNING_DURATION:-3m}"
mkdir -p "$CL/logs" "$CL/run"

bash "$REPO_ROOT/hack/cluster/build.sh"
# The CSI sidecars the storage tests run (external-provisioner, -attacher).
mapfile -t CSI_SIDECARS < <(bash "$REPO_ROOT/hack/csi/build.sh") || die "building the CSI sidecars failed"
# What kubectl top reads.
METRICS_SERVER_BIN=$(bash "$REPO_ROOT/hack/cluster/metrics-server-build.sh") || die "building metrics-server failed"
# What the Prometheus test scrapes with (kubernetes_sd through the node proxy).
PROMETHEUS_BIN=$(bash "$REPO_ROOT/hack/cluster/prometheus-build.sh") || die "building Prometheus failed"
# Built every time (seconds from the build cache): new certificates are added
# to an existing PKI.
(cd "$REPO_ROOT" && go build -o "$STACK_DIR/bin/pki" ./hack/tools/pki) || die "building pki failed"
"$STACK_DIR/bin/pki" cluster --dir "$PKI"
"$STACK_DIR/bin/pki" node --dir "$PKI" --name "$NODE_NAME" --ip "$NODE_IP"

# start NAME CMD...: runs CMD in the background unless NAME already runs.
start() {
	local name=$1
	shift
	pid_alive "$CL/run/$name.pid" && return 0
	log "starting $name"
	setsid "$@" >"$CL/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$CL/run/$name.pid"
}

# wait_for NAME SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local name=$1 secs=$2
	shift 2
	for _ in $(seq $((secs * 5))); do
		"$@" >/dev/null 2>&1 && return 0
		pid_alive "$CL/run/$name.pid" || break
		sleep 0.2
	done
	tail -n 40 "$CL/logs/$name.log" >&2
	die "$name did not become ready"
}

api() { curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:6443$1"; }

start etcd "$K8S_BIN/etcd" --name local --data-dir "$CL/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster local=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
wait_for etcd 20 curl -fsS http://127.0.0.1:2379/health

# Audit every request of node identities (metadata only), so the API load a
# node agent causes can be counted from the API server's side.
cat >"$CL/audit-policy.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
YAML
start kube-apiserver "$K8S_BIN/kube-apiserver" \
	--audit-policy-file="$CL/audit-policy.yaml" --audit-log-path="$CL/logs/audit.log" \
	--audit-log-maxsize=100 --audit-log-maxbackup=1 \
	--etcd-servers=http://127.0.0.1:2379 --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
	--endpoint-reconciler-type=none \
	--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
	--client-ca-file="$PKI/ca.crt" \
	--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --enable-bootstrap-token-auth \
	--service-cluster-ip-range=10.96.0.0/12 --allow-privileged=true \
	--requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client \
	--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
	--requestheader-extra-headers-prefix=X-Remote-Extra- \
	--proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
	--enable-aggregator-routing=true
wait_for kube-apiserver 90 api /readyz

start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
	--kubeconfig="$PKI/admin.kubeconfig" --authentication-kubeconfig="$PKI/admin.kubeconfig" \
	--authorization-kubeconfig="$PKI/admin.kubeconfig" --bind-address=127.0.0.1 \
	--leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
	--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
	--controllers='*,bootstrapsigner,tokencleaner' --cluster-signing-duration="$CLUSTER_SIGNING_DURATION" \
	--node-monitor-period=1s --node-monitor-grace-period=10s --node-startup-grace-period=10s
start kube-scheduler "$K8S_BIN/kube-scheduler" \
	--kubeconfig="$PKI/scheduler.kubeconfig" --authentication-kubeconfig="$PKI/scheduler.kubeconfig" \
	--authorization-kubeconfig="$PKI/scheduler.kubeconfig" --bind-address=127.0.0.1 --leader-elect=false
wait_for kube-controller-manager 60 api /api/v1/namespaces/default/serviceaccounts/default
wait_for kube-scheduler 60 curl -fsSk https://127.0.0.1:10259/healthz

# What kubeadm gives a cluster for TLS bootstrap: a bootstrap token, the
# node-bootstrapper role for its group, and the auto-approval of client
# CSRs (a new node's, with the token; a node's renewal, with its own
# certificate). Serving CSRs are never auto-approved (the tests approve
# them). The token is fixed: the control plane is local.
BOOTSTRAP_TOKEN_ID=nodelt
BOOTSTRAP_TOKEN_SECRET=0123456789abcdef
"$K8S_BIN/kubectl" --kubeconfig "$PKI/admin.kubeconfig" apply -f - >/dev/null <<YAML || die "bootstrap token and RBAC"
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$BOOTSTRAP_TOKEN_ID
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: $BOOTSTRAP_TOKEN_ID
  token-secret: $BOOTSTRAP_TOKEN_SECRET
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:kubeadm:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:kubelet-bootstrap
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-bootstrapper}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-bootstrap
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:nodeclient}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubeadm:node-autoapprove-certificate-rotation
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes}]
YAML
"$K8S_BIN/kubectl" config --kubeconfig="$PKI/bootstrap.kubeconfig" set-cluster local --server=https://127.0.0.1:6443 \
	--certificate-authority="$PKI/ca.crt" >/dev/null
"$K8S_BIN/kubectl" config --kubeconfig="$PKI/bootstrap.kubeconfig" set-credentials bootstrap \
	--token="$BOOTSTRAP_TOKEN_ID.$BOOTSTRAP_TOKEN_SECRET" >/dev/null
"$K8S_BIN/kubectl" config --kubeconfig="$PKI/bootstrap.kubeconfig" set-context default --cluster=local --user=bootstrap >/dev/null
"$K8S_BIN/kubectl" config --kubeconfig="$PKI/bootstrap.kubeconfig" use-context default >/dev/null

# The cluster block of .stack/env, replaced on every run.
sed -i '/^# cluster-up begin/,/^# cluster-up end/d' "$STACK_DIR/env"
cat >>"$STACK_DIR/env" <<ENV
# cluster-up begin
export K8S_BIN="$K8S_BIN"
export KUBECTL="$K8S_BIN/kubectl"
export KUBECONFIG="$PKI/admin.kubeconfig"
export NODE_NAME="$NODE_NAME"
export NODE_KUBECONFIG="$PKI/node-$NODE_NAME.kubeconfig"
export NODE_TLS_CERT="$PKI/node-$NODE_NAME-serving.crt"
export NODE_TLS_KEY="$PKI/node-$NODE_NAME-serving.key"
export CLIENT_CA_FILE="$PKI/ca.crt"
export CLUSTER_PKI="$PKI"
export BOOTSTRAP_KUBECONFIG="$PKI/bootstrap.kubeconfig"
export CLUSTER_SIGNING_DURATION="$CLUSTER_SIGNING_DURATION"
export AUDIT_LOG="$CL/logs/audit.log"
export CSI_PROVISIONER="${CSI_SIDECARS[0]}"
export METRICS_SERVER_BIN="$METRICS_SERVER_BIN"
export PROMETHEUS_BIN="$PROMETHEUS_BIN"
export CSI_ATTACHER="${CSI_SIDECARS[1]}"
# cluster-up end
ENV
log "control plane up: source $STACK_DIR/env; \$KUBECTL get nodes"
