#!/usr/bin/env bash
# vm-node-e2e: upstream's node e2e suite (e2e_node.test, built from the Go
# module proxy by hack/vm/node-e2e-build.sh) run in the real-node bed's
# guest (systemd, cgroup v2, containerd 2), first with the upstream kubelet
# as the framework's kubelet, then with nodelet: the agent's binary is
# copied beside e2e_node.test as `kubelet`, so the framework starts it with
# systemd-run (its config-changing tests restart it through systemctl) with
# its own API server and etcd run by e2e_node.test in the guest. Each run is
# a transient unit in the guest (it outlives the ssh session); its JUnit
# report and logs are copied back to $VM_DIR/node-e2e/AGENT, and a table of
# both agents' results per test is printed and written to
# $VM_DIR/node-e2e/results.txt. Boots the guest when none runs; needs the
# stack's registry (make stack-up) with the e2e test images
# (hack/tools/e2eimages, pushed here).
#   VM_NODE_E2E_FILES   the suite's files to run (ginkgo --focus-file; default: issue 37's list)
#   VM_NODE_E2E_FOCUS   ginkgo --focus within those files (default: every spec)
#   VM_NODE_E2E_SKIP    ginkgo --skip (default: [Flaky], [Benchmark], and what needs hardware the guest lacks)
#   VM_NODE_E2E_AGENTS  the agents (default: kubelet nodelet)
#   VM_NODE_E2E_TIMEOUT the suite's timeout per agent (default 3h)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
t_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
FILES="${VM_NODE_E2E_FILES:-summary_test resource_metrics_test pods_container_manager_test container_manager_test container_log_rotation_test eviction_test image_gc_test node_shutdown_linux_test swap_test memory_qos_test mirror_pod_test podresources_test critical_pod_test restart_test}"
FOCUS="${VM_NODE_E2E_FOCUS:-}"
SKIP="${VM_NODE_E2E_SKIP:-\[Flaky\]|\[Benchmark\]|\[Feature:GPUDevicePlugin\]|\[NodeFeature:SRIOV}"
AGENTS="${VM_NODE_E2E_AGENTS:-kubelet nodelet}"
TIMEOUT="${VM_NODE_E2E_TIMEOUT:-3h}"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
K8S_BIN="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION/bin"
OUT="$VM_DIR/node-e2e"

curl -fsS -o /dev/null "http://127.0.0.1:35000/v2/" || die "the stack's registry (127.0.0.1:35000) is not serving: make stack-up"
bash "$REPO_ROOT/hack/vm/node-e2e-build.sh" || die "building e2e_node.test failed"
bash "$REPO_ROOT/hack/conformance/build.sh" || die "building the e2e test images' binaries failed"
(cd "$REPO_ROOT" && go build -buildvcs=auto -o bin/nodelet ./cmd/nodelet) || die "building nodelet failed"
# OpenBSD nc for the agnhost image (busybox's has no -u), as make conformance.
dpkg-query -W -f='${Status}' netcat-openbsd 2>/dev/null | grep -q "install ok installed" ||
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends netcat-openbsd >/dev/null; } ||
	die "installing netcat-openbsd failed"
log "pushing the e2e test images into the local registry"
# shellcheck source=/dev/null
source "$STACK_DIR/env"
(cd "$REPO_ROOT" && go build -o "$STACK_DIR/bin/e2eimages" ./hack/tools/e2eimages) || die "building hack/tools/e2eimages failed"
k8s_src=$(cd "${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION/e2e-wrapper" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
# nginx for the nginx test image: Debian's package extracted, not installed.
if [ ! -x "$STACK_DIR/nginx/usr/sbin/nginx" ]; then
	rm -rf "$STACK_DIR/nginx" && mkdir -p "$STACK_DIR/nginx"
	(cd "$STACK_DIR/nginx" && apt-get download nginx >/dev/null 2>&1 && dpkg-deb -x nginx_*.deb .) ||
		die "downloading Debian's nginx package (for the nginx test image) failed"
fi
"$STACK_DIR/bin/e2eimages" --registry "$REGISTRY" --bin "$K8S_BIN" --k8s-src "$k8s_src" --pause "$STACK_DIR/bin/pause" --nginx "$STACK_DIR/nginx/usr/sbin/nginx" ||
	die "pushing the e2e test images failed"

# fresh_guest: every agent gets a freshly booted guest (every boot is a
# fresh disk), prepared for the suite.
fresh_guest() {
	if vm_running; then bash "$REPO_ROOT/hack/vm/down.sh" || die "powering the guest off failed"; fi
	bash "$REPO_ROOT/hack/vm/up.sh" || die "the guest did not come up (make vm-up)"
	vm_ssh true || die "the guest runs but ssh does not answer: make vm-down && make vm-up"
	# The suite runs node commands through sudo (it restarts the kubelet
	# with `sudo systemctl`); the guest has no sudo and runs all as root.
	vm_ssh 'command -v sudo >/dev/null || { printf "#!/bin/sh\nexec \"\$@\"\n" >/usr/local/bin/sudo && chmod 0755 /usr/local/bin/sudo; }'
	# The suite's own API server listens on the guest's 127.0.0.1:6443,
	# where the bed forwards the host's: that forward is stopped.
	vm_ssh 'systemctl stop nodelet-forward-6443.socket nodelet-forward-6443.service'
}

focus_files=$(echo "$FILES" | tr ' ' '\n' | sed '/^$/d; s/$/\\.go$/' | paste -sd'|')
mkdir -p "$OUT"
for a in $AGENTS; do
	case $a in
	nodelet) src="$REPO_ROOT/bin/nodelet" ;;
	kubelet) src="$K8S_BIN/kubelet" ;;
	*) die "VM_NODE_E2E_AGENTS: unknown agent $a (kubelet, nodelet)" ;;
	esac
	d=/root/node-e2e/$a
	fresh_guest
	log "node e2e with $a: copying e2e_node.test and the agent (as $d/kubelet) into the guest"
	vm_ssh "rm -rf $d && mkdir -p $d/report" || die "preparing $d in the guest failed"
	vm_ssh "cat >$d/e2e_node.test && chmod 0755 $d/e2e_node.test" <"$K8S_BIN/e2e_node.test" || die "copying e2e_node.test failed"
	vm_ssh "cat >$d/kubelet && chmod 0755 $d/kubelet" <"$src" || die "copying $src failed"
	# The base KubeletConfiguration: upstream's node e2e default
	# (test/e2e_node/jenkins/default-kubelet-config.yaml) with this node's
	# cgroup driver (containerd's SystemdCgroup = true).
	vm_ssh "cat >$d/kubelet-base.yaml" <<'YAML' || die "writing the base configuration failed"
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
cgroupRoot: /
podCIDR: "10.100.0.0/24"
volumeStatsAggPeriod: 10s
fileCheckFrequency: 10s
evictionPressureTransitionPeriod: 30s
evictionHard:
  memory.available: 250Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
evictionMinimumReclaim:
  nodefs.available: 5%
  nodefs.inodesFree: 5%
serializeImagePulls: false
YAML
	# --runtime-cgroups: the runtime's cgroup for the summary's "runtime"
	# system container, as upstream's containerd node e2e jobs pass it.
	t=$(date +%s.%N)
	log "node e2e with $a: files ${FILES// /, } (a transient unit node-e2e-$a in the guest)"
	vm_ssh "systemctl reset-failed node-e2e-$a 2>/dev/null; systemd-run --unit=node-e2e-$a --working-directory=$d --property=StandardOutput=file:$d/run.log --property=StandardError=file:$d/run.log \
		timeout $TIMEOUT $d/e2e_node.test --ginkgo.focus-file='$focus_files' ${FOCUS:+--ginkgo.focus='$FOCUS'} --ginkgo.skip='$SKIP' --ginkgo.no-color --ginkgo.v \
		--ginkgo.junit-report=$d/report/junit.xml --ginkgo.timeout=$TIMEOUT \
		--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-name=nodelet-vm \
		--kubelet-config-file=$d/kubelet-base.yaml --kubelet-flags=--runtime-cgroups=/system.slice/containerd.service \
		--report-dir=$d/report --prepull-images=false --v=4" >/dev/null ||
		die "starting the suite in the guest failed"
	while [ "$(vm_ssh systemctl is-active "node-e2e-$a" 2>/dev/null)" = active ]; do
		sleep 30
		echo "  $a: specs done so far: $(vm_ssh "grep -a -c -E '^• ' $d/run.log" 2>/dev/null || true)" >&2
	done
	rm -rf "${OUT:?}/$a" && mkdir -p "$OUT/$a"
	vm_ssh "tar -C $d -cz report run.log" | tar -C "$OUT/$a" -xz || log "copying $a's report back failed"
	log "node e2e with $a: done in $(elapsed "$t")s"
done
python3 "$REPO_ROOT/hack/vm/node-e2e-report.py" "$OUT" $AGENTS | tee "$OUT/results.txt" >&2
log "vm-node-e2e done in $(elapsed "$t_start")s; reports in $OUT"
