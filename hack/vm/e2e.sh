#!/usr/bin/env bash
# vm-e2e: the real-node test bed's end-to-end checks, each run in the guest
# with the upstream kubelet and then with nodelet, side by side (see
# docs/real-node.md). Boots the guest when none runs (hack/vm/up.sh), builds
# nodelet and the upstream kubelet (hack/cluster/build.sh, cached) and copies
# both into it. A scenario is hack/vm/guest/NAME.sh (piped into the guest
# after guest/lib.sh) or hack/vm/host/NAME.sh (run on the host, driving the
# guest over ssh and the host's control plane, which it brings up: make
# cluster-up); a scenario may power the guest off, and the next one boots
# it again. The results, one line per check and agent, go to
# $VM_DIR/e2e-results.txt, and a table of both agents on stderr. Fails when
# nodelet fails a check; the upstream kubelet's failures are reported beside
# them, not fatal (it is the reference, not the subject).
#   VM_E2E_SCENARIOS  the scenarios to run (default: cgroups swap node; eviction, half an hour, on demand)
#   VM_E2E_AGENTS     the agents (default: kubelet nodelet)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root
t_start=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
SCENARIOS="${VM_E2E_SCENARIOS:-cgroups swap node}"
AGENTS="${VM_E2E_AGENTS:-kubelet nodelet}"
K8S_VERSION="${K8S_VERSION:-v1.37.2}"

# The guest pulls from the host's registry (stack-up).
curl -fsS -o /dev/null "http://127.0.0.1:35000/v2/" || die "the stack's registry (127.0.0.1:35000) is not serving: make stack-up"
for s in $SCENARIOS; do
	[ "$s" != lib ] && { [ -f "$REPO_ROOT/hack/vm/guest/$s.sh" ] || [ -f "$REPO_ROOT/hack/vm/host/$s.sh" ]; } ||
		die "VM_E2E_SCENARIOS: no scenario $s in hack/vm/guest or hack/vm/host"
	if [ -f "$REPO_ROOT/hack/vm/host/$s.sh" ] && ! grep -q '^export BOOTSTRAP_KUBECONFIG=' "$STACK_DIR/env" 2>/dev/null; then
		log "scenario $s needs the host's control plane: make cluster-up"
		bash "$REPO_ROOT/hack/cluster/up.sh" || die "the control plane did not come up (make cluster-up)"
	fi
done

log "building nodelet and the upstream kubelet $K8S_VERSION"
(cd "$REPO_ROOT" && go build -buildvcs=auto -o bin/nodelet ./cmd/nodelet) || die "building nodelet failed"
bash "$REPO_ROOT/hack/cluster/build.sh" || die "building the upstream kubelet failed"
KUBELET="${K8S_CACHE_DIR:-$REPO_ROOT/.cache/k8s}/$K8S_VERSION/bin/kubelet"

# guest_ready: boots the guest when none runs (every boot is a fresh disk)
# and copies both agents into it as /usr/local/bin/e2e-AGENT.
guest_ready() {
	if ! vm_running; then
		bash "$REPO_ROOT/hack/vm/up.sh" || die "the guest did not come up (make vm-up)"
		COPIED=""
	fi
	vm_ssh true || die "the guest runs but ssh does not answer: make vm-down && make vm-up"
	[ -n "${COPIED:-}" ] && return
	local a src
	for a in $AGENTS; do
		case $a in
		nodelet) src="$REPO_ROOT/bin/nodelet" ;;
		kubelet) src="$KUBELET" ;;
		*) die "VM_E2E_AGENTS: unknown agent $a (kubelet, nodelet)" ;;
		esac
		vm_ssh "cat >/usr/local/bin/e2e-$a.tmp && chmod 0755 /usr/local/bin/e2e-$a.tmp && mv /usr/local/bin/e2e-$a.tmp /usr/local/bin/e2e-$a" <"$src" ||
			die "copying $src into the guest failed"
	done
	COPIED=1
}

RESULTS="$VM_DIR/e2e-results.txt"
: >"$RESULTS"
failed=0
for s in $SCENARIOS; do
	for a in $AGENTS; do
		guest_ready
		t=$(date +%s.%N)
		log "scenario $s with $a"
		if [ -f "$REPO_ROOT/hack/vm/host/$s.sh" ]; then
			out=$(bash "$REPO_ROOT/hack/vm/host/$s.sh" "$a") || out+=$'\n'"FAIL scenario: hack/vm/host/$s.sh ended with an error"
		else
			out=$(cat "$REPO_ROOT/hack/vm/guest/lib.sh" "$REPO_ROOT/hack/vm/guest/$s.sh" | vm_ssh bash -s "$a" "/usr/local/bin/e2e-$a") ||
				out+=$'\n'"FAIL ssh: the scenario's ssh session ended with an error"
		fi
		echo "$out" | sed 's/^/    /' >&2
		echo "$out" | sed -n "s/^\(ok\|FAIL\|measure\) /$s $a \1 /p" >>"$RESULTS"
		echo "$s $a measure wall-s $(elapsed "$t")" >>"$RESULTS"
		if echo "$out" | grep -q '^FAIL '; then
			[ "$a" = nodelet ] && failed=1
			log "scenario $s: $a failed $(echo "$out" | grep -c '^FAIL ') check(s)"
		fi
	done
done
log "vm-e2e done in $(elapsed "$t_start")s; results in $RESULTS"
printf '%-72s %-8s %-8s\n' check kubelet nodelet >&2
awk '$3 == "ok" || $3 == "FAIL" { k = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", k); sub(/: .*/, "", k); k = $1 " " k; r[k, $2] = $3; keys[k] = 1 }
	END { for (k in keys) printf "%-72s %-8s %-8s\n", k, r[k, "kubelet"], r[k, "nodelet"] }' "$RESULTS" | sort >&2
grep ' measure ' "$RESULTS" >&2 || true
[ "$failed" = 0 ] || die "nodelet failed checks in the guest (see above)"
