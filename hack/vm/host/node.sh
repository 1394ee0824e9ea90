#!/usr/bin/env bash
# node.sh AGENT: the test bed's guest joins the host's control plane as an
# operator's node does, then is powered off with pods on it. Run on the host
# by hack/vm/e2e.sh (the guest up, the control plane up).
#   1. Installed as operators install it: nodelet by `make install`'s script
#      (hack/install.sh: /usr/local/bin/nodelet, nodelet.service and
#      kubeadm's drop-in), the upstream kubelet from the Kubernetes
#      packages' unit files (hack/vm/kubelet/); then the files `kubeadm
#      join` writes (bootstrap-kubelet.conf with the cluster's bootstrap
#      token, pki/ca.crt, kubeadm's KubeletConfiguration with
#      serverTLSBootstrap and a graceful shutdown, kubeadm-flags.env) and
#      `systemctl enable --now`.
#   2. The node joins by TLS bootstrap (its client CSR auto-approved, its
#      serving CSRs approved here as an operator does) and is Ready; a pod
#      bound to it runs; kubectl logs, exec and port-forward reach it through
#      the API server and the agent's 10250; the agent's own log is in
#      journald (journalctl -u) and the node log query (enableSystemLogQuery)
#      answers through the API server as upstream's e2e tests
#      ([Feature:NodeLogQuery], test/e2e/node/kubelet.go) expect: the same
#      text as journalctl run in the guest with the same options.
#   3. `systemctl poweroff` in the guest with a regular pod and a
#      system-cluster-critical one on the node: the agent's delay inhibitor
#      holds logind, the node reports it is shutting down, both pods end with
#      DisruptionTarget (the regular one exits 0 on SIGTERM: Succeeded; the
#      critical one exits 1: Failed, reason Terminated), the regular one
#      first, all seen from the host before the guest is gone.
# Uses hack/vm/host/lib.sh. Prints "ok NAME: DETAIL" / "FAIL NAME: DETAIL" and "measure NAME VALUE"
# lines; exits 0 (hack/vm/e2e.sh decides). Leaves the guest powered off.
AGENT=$1
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
GRACE=20 CRITICAL_GRACE=8
join "shutdownGracePeriod: ${GRACE}s
shutdownGracePeriodCriticalPods: ${CRITICAL_GRACE}s
enableSystemLogQuery: true" || { leave; exit 0; }

# A pod bound to the node: it logs, serves a file over HTTP, exits on TERM.
WEB='mkdir -p /www && echo hello-web >/www/index.html && httpd -p 8080 -h /www; trap "exit 0" TERM; while true; do echo tick; sleep 1; done'
CRITICAL=${WEB/exit 0/exit 1}
RES="{requests: {cpu: 50m, memory: 16Mi}, limits: {cpu: 200m, memory: 64Mi}}"
t0=$(now)
t_pods=$(date -u +%Y-%m-%dT%H:%M:%SZ)
pod "$NS" web "$WEB" "" "$RES" | k apply -f - >/dev/null
pod kube-system "$NS-critical" "$CRITICAL" system-cluster-critical "$RES" | k apply -f - >/dev/null
if ! k wait -n "$NS" pod/web --for=condition=Ready --timeout=180s >/dev/null 2>&1 ||
	! k wait -n kube-system "pod/$NS-critical" --for=condition=Ready --timeout=60s >/dev/null 2>&1; then
	fail "pods Running" "$(k get pod -n "$NS" web -o wide --no-headers 2>&1); $SERVICE's last lines:"
	guest_log 20
	leave
	exit 0
fi
ok "pods Running" "web and $NS-critical Ready on $NODE"
echo "measure pod-ready-s $(since "$t0")"

logs=$(k logs -n "$NS" web --tail=3 2>&1)
case $logs in *tick*) ok "kubectl logs" "$(echo "$logs" | wc -l) lines of ticks" ;; *) fail "kubectl logs" "$logs" ;; esac
out=$(k exec -n "$NS" web -- cat /www/index.html 2>&1)
[ "$out" = hello-web ] && ok "kubectl exec" "$out" || fail "kubectl exec" "$out"
port=$((20000 + RANDOM % 10000))
k port-forward -n "$NS" pod/web "$port:8080" >/dev/null 2>&1 &
pf=$!
out=""
for _ in $(seq 20); do
	out=$(curl -fsS "http://127.0.0.1:$port/" 2>/dev/null) && break
	sleep 0.5
done
kill $pf 2>/dev/null
[ "$out" = hello-web ] && ok "kubectl port-forward" "$out" || fail "kubectl port-forward" "curl through 127.0.0.1:$port got '$out'"
n=$(vm_ssh journalctl -u "$SERVICE" --no-pager -o cat 2>/dev/null | wc -l)
[ "$n" -gt 0 ] && ok "journalctl -u $SERVICE" "$n lines" || fail "journalctl -u $SERVICE" "no lines"
# The node log query, as upstream's [Feature:NodeLogQuery] tests ask it
# (their `kubelet` is this agent's unit): the answer through the API server
# equals journalctl's in the guest (tried three times: the agent may log
# between the two).
unit=${SERVICE%.service}
logq() { k get --raw "/api/v1/nodes/$NODE/proxy/logs/?$1" 2>&1; }
same_as_journal() { # NAME QUERY JOURNALCTL-ARGS
	local got want
	for _ in 1 2 3; do
		got=$(logq "$2")
		want=$(vm_ssh "journalctl --utc --no-pager --output=short-precise $3" 2>&1)
		[ "$got" = "$want" ] && [ -n "$got" ] && { ok "$1" "$(echo "$got" | wc -l) lines, as journalctl $3"; return; }
		sleep 1
	done
	fail "$1" "got '$(echo "$got" | tail -2)', journalctl $3: '$(echo "$want" | tail -2)'"
}
if out=$(logq query); then fail "log query empty" "answered: $out"; else ok "log query empty" "refused: $out"; fi
case $(logq "query=$unit") in *"$unit"*) ok "log query service" "query=$unit has the unit's lines" ;; *) fail "log query service" "$(logq "query=$unit" | tail -2)" ;; esac
same_as_journal "log query tailLines" "query=$unit&tailLines=3" "-u $unit -n 3"
same_as_journal "log query pattern" "query=$unit&boot=0&pattern=Started" "-u $unit --grep Started --boot 0"
same_as_journal "log query sinceTime" "query=$unit&sinceTime=$t_pods" "-u $unit --since '$(date -u -d "$t_pods" '+%Y-%-m-%-d %H:%-M:%-S')'"
out=$(logq "query=/dpkg.log")
want=$(vm_ssh cat /var/log/dpkg.log)
[ -n "$want" ] && [ "$out" = "$want" ] && ok "log query file" "query=/dpkg.log is /var/log/dpkg.log" || fail "log query file" "query=/dpkg.log: $(echo "$out" | tail -1)"
uid=$(k get pod -n "$NS" web -o jsonpath='{.metadata.uid}')
slice=kubepods-burstable-pod${uid//-/_}.slice
got=$(vm_ssh systemctl show "$slice" -p MemoryMax --value)
[ "$got" = 67108864 ] && ok "pod slice over D-Bus" "$slice MemoryMax=$got" || fail "pod slice over D-Bus" "$slice MemoryMax='$got'"

# The stats on cgroup v2 with PSI (KEP-4205), through the API server.
sum=$(k get --raw "/api/v1/nodes/$NODE/proxy/stats/summary" 2>&1)
psi=$(echo "$sum" | python3 -c 'import json,sys
s = json.load(sys.stdin)
n = s["node"]
p = [x for x in s["pods"] if x["podRef"]["name"] == "web"][0]
c = p["containers"][0]
def has(x, k): return "psi" in x.get(k, {}) and "some" in x[k]["psi"]
print(" ".join("%s=%s" % (w, has(o, k)) for w, o in (("node", n), ("pod", p), ("container", c)) for k in ("cpu", "memory")))
print("node-cpu-some-total=%d" % n["cpu"]["psi"]["some"]["total"])' 2>&1)
case $psi in
"node=True node=True pod=True pod=True container=True container=True"*) ok "stats/summary PSI" "cpu and memory psi for the node, the pod and its container; $(echo "$psi" | tail -1)" ;;
*) fail "stats/summary PSI" "$(echo "$psi" | head -3)" ;;
esac
met=$(k get --raw "/api/v1/nodes/$NODE/proxy/metrics/cadvisor" 2>&1 | grep -c '^container_pressure_\(cpu\|memory\|io\)_waiting_seconds_total{')
[ "$met" -gt 0 ] && ok "metrics/cadvisor PSI" "$met container_pressure_*_waiting_seconds_total series" || fail "metrics/cadvisor PSI" "no container_pressure_*_waiting_seconds_total series"

# 3. Power off.
inh=$(vm_ssh systemd-inhibit --list --no-pager --no-legend 2>/dev/null | grep -i 'shutdown' | grep -i delay)
[ -n "$inh" ] && ok "delay inhibitor" "$(echo "$inh" | awk '{$1=$1; print}')" || fail "delay inhibitor" "none in systemd-inhibit --list"
max=$(vm_ssh busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec 2>/dev/null)
[ "$max" = "t $((GRACE * 1000000))" ] && ok "InhibitDelayMaxSec" "$max" || fail "InhibitDelayMaxSec" "logind has '$max', want t $((GRACE * 1000000))"

t0=$(now)
vm_ssh 'systemd-run --on-active=1 --quiet systemctl poweroff' >/dev/null 2>&1
web_done="" crit_done="" not_ready=""
terminal() { case $(k get pod -n "$1" "$2" -o jsonpath='{.status.phase}' 2>/dev/null) in Succeeded | Failed) return 0 ;; esac; return 1; }
for _ in $(seq 240); do
	[ -z "$not_ready" ] && k get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}' 2>/dev/null | grep -qi 'shutting down' && not_ready=$(since "$t0")
	[ -z "$web_done" ] && terminal "$NS" web && web_done=$(since "$t0")
	[ -z "$crit_done" ] && terminal kube-system "$NS-critical" && crit_done=$(since "$t0")
	[ -n "$web_done" ] && [ -n "$crit_done" ] && [ -n "$not_ready" ] && break
	vm_running || break
	sleep 0.5
done
[ -n "$not_ready" ] && ok "node shutting down" "Ready false, 'node is shutting down', ${not_ready}s after poweroff" || fail "node shutting down" "the Ready condition never said the node is shutting down"
want="Succeeded  TerminationByKubelet|"
for p in "$NS/web" "kube-system/$NS-critical"; do
	st=$(k get pod -n "${p%%/*}" "${p#*/}" -o jsonpath='{.status.phase} {.status.reason} {.status.conditions[?(@.type=="DisruptionTarget")].reason}|{.status.message}' 2>&1)
	[ "$st" = "$want" ] && ok "shutdown status ${p#*/}" "$st" || fail "shutdown status ${p#*/}" "got '$st', want '$want'"
	want="Failed Terminated TerminationByKubelet|Pod was terminated in response to imminent node shutdown."
done
echo "measure shutdown-web-terminal-s ${web_done:-none}"
echo "measure shutdown-critical-terminal-s ${crit_done:-none}"
if [ -n "$web_done" ] && [ -n "$crit_done" ] && awk -v a="$web_done" -v b="$crit_done" 'BEGIN { exit !(a <= b) }'; then
	ok "shutdown order" "regular pod terminal at ${web_done}s, critical at ${crit_done}s"
else
	fail "shutdown order" "regular pod at ${web_done:-never}, critical at ${crit_done:-never}"
fi
for _ in $(seq 120); do vm_running || break; sleep 1; done
if vm_running; then
	fail "guest powered off" "still running 120 s after poweroff"
else
	ok "guest powered off" "$(since "$t0")s after systemctl poweroff"
	echo "measure poweroff-s $(since "$t0")"
fi
kill "$APPROVER" 2>/dev/null
forget
