# shellcheck shell=bash
# What the host-side scenarios of hack/vm/host/ share: the guest's node
# joining the host's control plane as an operator's node does, and leaving
# it. Sourced by a scenario after it set AGENT (kubelet or nodelet); sets
# NODE, NS, SERVICE.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
set +e
[ -f "$STACK_DIR/env" ] || die "no $STACK_DIR/env: make stack-up cluster-up"
# shellcheck source=/dev/null
source "$STACK_DIR/env"
[ -n "${BOOTSTRAP_KUBECONFIG:-}" ] || die "the control plane is not up: make cluster-up"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
KUBELET="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION/bin/kubelet"
NODE=vm-$AGENT
NS=vm-e2e-$AGENT
case $AGENT in
nodelet) SERVICE=nodelet.service ;;
kubelet) SERVICE=kubelet.service ;;
*) die "unknown agent $AGENT (kubelet, nodelet)" ;;
esac
# The taint keeps the cluster's scheduler off the guest's node; the
# scenarios' pods tolerate it (and are bound by nodeName).
TAINT=nodelet.dev/real-node-bed

ok() { echo "ok $1: $2"; }
fail() { echo "FAIL $1: $2"; }
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
guest_log() { vm_ssh journalctl -u "$SERVICE" --no-pager -n "${1:-15}" | sed 's/^/    /'; }

# forget: the API's objects of this agent's node from an earlier run.
forget() {
	# Pods of a node that is gone never finish terminating: forced.
	k delete pod -n "$NS" --all --grace-period=0 --force >/dev/null 2>&1
	k delete pod -n kube-system -l "vm-e2e=$AGENT" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1
	k delete namespace "$NS" --ignore-not-found --timeout=120s >/dev/null 2>&1
	k delete node "$NODE" --ignore-not-found --wait=false >/dev/null 2>&1
	k get csr -o jsonpath='{range .items[?(@.spec.username=="system:node:'"$NODE"'")]}{.metadata.name}{"\n"}{end}' 2>/dev/null |
		xargs -r "$KUBECTL" --kubeconfig "$KUBECONFIG" delete csr >/dev/null 2>&1
}

# approve: approves this node's serving CSRs for as long as it runs, as an
# operator (or an approver) does: they are never approved automatically,
# and 3-minute certificates renew within a scenario.
approve() {
	while :; do
		k get csr -o jsonpath='{range .items[?(@.spec.signerName=="kubernetes.io/kubelet-serving")]}{.metadata.name} {.spec.username} {.status.conditions[0].type}{"\n"}{end}' 2>/dev/null |
			awk -v u="system:node:$NODE" '$2 == u && $3 == "" { print $1 }' |
			xargs -r "$KUBECTL" --kubeconfig "$KUBECONFIG" certificate approve >/dev/null 2>&1
		sleep 2
	done
}

# join [EXTRA-CONFIG]: installs the agent in the guest as operators do and
# joins the node to the host's control plane with the bootstrap token; the
# lines EXTRA-CONFIG are added to kubeadm's KubeletConfiguration. Prints
# its checks; fails when the node did not become Ready.
#   nodelet: `make install`'s script (hack/install.sh) run in the guest:
#     /usr/local/bin/nodelet, nodelet.service, kubeadm's drop-in;
#   kubelet: the Kubernetes packages' unit and drop-in (hack/vm/kubelet/).
# Then the files `kubeadm join` writes: bootstrap-kubelet.conf (the
# cluster's token), pki/ca.crt, kubeadm's KubeletConfiguration (`kubeadm
# config print join-defaults --component-configs KubeletConfiguration`,
# with serverTLSBootstrap) and kubeadm-flags.env; `systemctl enable --now`.
join() {
	forget
	if [ "$AGENT" = nodelet ]; then
		[ -x "$REPO_ROOT/bin/nodelet" ] || die "no bin/nodelet (hack/vm/e2e.sh builds it)"
		local out
		if out=$(tar -C "$REPO_ROOT" -cz hack/lib.sh hack/install.sh deploy/systemd bin/nodelet |
			vm_ssh 'rm -rf /root/nodelet && mkdir -p /root/nodelet && tar -C /root/nodelet -xz && cd /root/nodelet && bash hack/install.sh' 2>&1); then
			ok "make install" "$(echo "$out" | tail -1 | sed 's/^\[[0-9:]*\] //')"
		else
			fail "make install" "$out"
			return 1
		fi
	else
		if tar -C "$REPO_ROOT/hack/vm/kubelet" -c kubelet.service 10-kubeadm.conf | vm_ssh 'set -e; d=$(mktemp -d); tar -C $d -x
			install -m 0644 $d/kubelet.service /etc/systemd/system/kubelet.service
			install -D -m 0644 $d/10-kubeadm.conf /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
			systemctl daemon-reload' &&
			vm_ssh 'cat >/usr/local/bin/kubelet.tmp && chmod 0755 /usr/local/bin/kubelet.tmp && mv /usr/local/bin/kubelet.tmp /usr/local/bin/kubelet' <"$KUBELET"; then
			ok "installed" "kubelet.service and kubeadm's drop-in from the Kubernetes packages"
		else
			fail installed "copying the unit or $KUBELET into the guest failed"
			return 1
		fi
	fi
	if [ "$(vm_ssh systemctl cat "$SERVICE" 2>&1 | grep -c 'KUBELET_KUBEADM_ARGS')" -ge 2 ]; then
		ok "kubeadm drop-in" "$SERVICE reads kubeadm-flags.env"
	else
		fail "kubeadm drop-in" "systemctl cat $SERVICE: no KUBELET_KUBEADM_ARGS"
	fi
	{
		echo "--- /etc/kubernetes/bootstrap-kubelet.conf"
		k config view --kubeconfig "$BOOTSTRAP_KUBECONFIG" --raw --flatten
		echo "--- /etc/kubernetes/pki/ca.crt"
		cat "$CLIENT_CA_FILE"
		echo "--- /var/lib/kubelet/config.yaml"
		# kubeadm's lines, less those EXTRA-CONFIG sets again.
		local keys
		keys=$(printf '%s\n' "${1:-}" | sed -n 's/^\([A-Za-z]*\):.*/\1/p' | paste -sd'|')
		cat <<YAML | grep -Ev "^(${keys:-^})(:|\$)"
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: unix:///var/run/containerd/containerd.sock
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
serverTLSBootstrap: true
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
YAML
		printf '%s\n' "${1:-}"
		echo "--- /var/lib/kubelet/kubeadm-flags.env"
		echo "KUBELET_KUBEADM_ARGS=\"--hostname-override=$NODE --node-ip=$VM_GUEST_IP --register-with-taints=$TAINT=:NoSchedule\""
	} | vm_ssh 'set -e; f=; while IFS= read -r l; do case $l in "--- "*) f=${l#--- }; mkdir -p "$(dirname "$f")"; : >"$f";; *) printf "%s\n" "$l" >>"$f";; esac; done
		chmod 0600 /etc/kubernetes/bootstrap-kubelet.conf; mkdir -p /etc/kubernetes/manifests' ||
		{ fail "join files" "writing kubeadm's files in the guest failed"; return 1; }

	approve &
	APPROVER=$!
	trap 'kill $APPROVER 2>/dev/null' EXIT
	local t0 ready="" client addr
	t0=$(now)
	vm_ssh systemctl enable --now "$SERVICE" >/dev/null 2>&1 || fail "systemctl enable --now" "$SERVICE did not start"
	for _ in $(seq 240); do
		ready=$(k get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)
		[ "$ready" = True ] && break
		sleep 0.5
	done
	if [ "$ready" != True ]; then
		fail "node Ready" "node $NODE not Ready after 120 s (Ready=$ready); $SERVICE's last lines:"
		guest_log 20
		return 1
	fi
	ok "node Ready" "$NODE joined with the bootstrap token"
	echo "measure join-to-ready-s $(since "$t0")"
	client=$(vm_ssh readlink /var/lib/kubelet/pki/kubelet-client-current.pem)
	case $client in
	/var/lib/kubelet/pki/kubelet-client-*.pem) ok "client certificate" "kubelet-client-current.pem -> $(basename "$client")" ;;
	*) fail "client certificate" "/var/lib/kubelet/pki/kubelet-client-current.pem -> '$client'" ;;
	esac
	if [ "$(vm_ssh "grep -c 'client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem' /etc/kubernetes/kubelet.conf")" = 1 ]; then
		ok "kubelet.conf written" "points at kubelet-client-current.pem"
	else
		fail "kubelet.conf written" "/etc/kubernetes/kubelet.conf does not point at the current client certificate"
	fi
	addr=$(k get node "$NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
	[ "$addr" = "$VM_GUEST_IP" ] && ok "node address" "InternalIP $addr" || fail "node address" "InternalIP '$addr', want $VM_GUEST_IP"
	k create namespace "$NS" >/dev/null 2>&1 || { fail namespace "cannot create namespace $NS"; return 1; }
	return 0
}

# leave: the node's pods deleted through the API (the agent unmounts their
# volumes), the agent stopped and disabled, its state removed, the Node
# deleted: the guest is ready for the other agent.
leave() {
	k delete namespace "$NS" --ignore-not-found --timeout=90s >/dev/null 2>&1
	k delete pod -n kube-system -l "vm-e2e=$AGENT" --ignore-not-found --timeout=60s >/dev/null 2>&1
	vm_ssh "systemctl disable --now $SERVICE >/dev/null 2>&1; crictl rmp -fa >/dev/null 2>&1
		findmnt -rn -o TARGET | grep '^/var/lib/kubelet/' | sort -r | xargs -r umount
		rm -rf /var/lib/kubelet /etc/kubernetes" >/dev/null 2>&1
	kill "${APPROVER:-}" 2>/dev/null
	forget
}

# pod NAMESPACE NAME COMMAND [PRIORITY-CLASS] [RESOURCES]: a busybox pod
# bound to the node (restartPolicy Never), labelled vm-e2e=AGENT.
pod() {
	local prio="" res="{}"
	[ -n "${4:-}" ] && prio="priorityClassName: $4"
	[ -n "${5:-}" ] && res=$5
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1, labels: {vm-e2e: $AGENT}}
spec:
  nodeName: $NODE
  restartPolicy: Never
  tolerations: [{key: $TAINT, operator: Exists}, {key: node.kubernetes.io/memory-pressure, operator: Exists}]
  terminationGracePeriodSeconds: 30
  $prio
  containers:
  - name: c
    image: docker.io/library/busybox:1.36
    command: [sh, -c, '$3']
    resources: $res
YAML
}
