#!/usr/bin/env bash
# demo: nodelet's main job on this machine. Starts the local stack, runs
# nodelet in standalone mode over the manifests in examples/, and shows the
# pods running with their IPs and logs. `hack/demo.sh stop` removes the
# manifests (nodelet stops the pods gracefully) and stops nodelet.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
need_root

stop_demo() {
	if pid_alive "$DEMO_PID"; then
		log "removing the demo manifests; nodelet stops their pods"
		rm -f "$DEMO_DIR"/manifests/*.yaml
		for _ in $(seq 60); do
			[ -z "$("$CRICTL" pods -q --name "$DEMO_NODE" 2>/dev/null)" ] && break
			sleep 0.5
		done
		kill "$(cat "$DEMO_PID")" 2>/dev/null || true
		rm -f "$DEMO_PID"
	fi
	log "demo stopped"
}

bash hack/stack-up.sh
# shellcheck source=/dev/null
source "$STACK_DIR/env"
if [ "${1:-}" = stop ]; then
	stop_demo
	exit 0
fi

[ -x bin/nodelet ] || go build -o bin/nodelet ./cmd/nodelet
mkdir -p "$DEMO_DIR/manifests" "$DEMO_DIR/root" "$DEMO_DIR/logs"
echo "nameserver 127.0.0.1" >"$DEMO_DIR/resolv.conf"
sed -e "s#@MANIFESTS@#$DEMO_DIR/manifests#" -e "s#@RUNTIME@#$CONTAINER_RUNTIME_ENDPOINT#" \
	-e "s#@LOGS@#$DEMO_DIR/logs#" -e "s#@RESOLV@#$DEMO_DIR/resolv.conf#" \
	examples/kubelet-config.yaml >"$DEMO_DIR/kubelet-config.yaml"

if pid_alive "$DEMO_PID"; then
	log "restarting the demo nodelet (its pods keep running and are adopted)"
	kill "$(cat "$DEMO_PID")"
	sleep 0.5
fi
for f in examples/*.yaml; do
	[ "$(basename "$f")" = kubelet-config.yaml ] && continue
	cp "$f" "$DEMO_DIR/manifests/"
done
setsid bin/nodelet --config "$DEMO_DIR/kubelet-config.yaml" --root-dir "$DEMO_DIR/root" \
	--hostname-override "$DEMO_NODE" --node-ip "$NODE_IP" >"$DEMO_DIR/nodelet.log" 2>&1 </dev/null &
echo $! >"$DEMO_PID"
log "nodelet started (pid $(cat "$DEMO_PID")), log: $DEMO_DIR/nodelet.log"

want=$(ls "$DEMO_DIR"/manifests/*.yaml | wc -l)
for _ in $(seq 120); do
	ready=$("$CRICTL" pods --name "$DEMO_NODE" --state ready -q 2>/dev/null | wc -l)
	[ "$ready" -ge "$want" ] && break
	sleep 0.5
done
sleep 4 # let the containers write a few lines

echo
echo "== healthz: $(curl -fsS http://127.0.0.1:10248/healthz)"
echo
echo "== pods (crictl pods)"
"$CRICTL" pods --name "$DEMO_NODE"
echo
echo "== containers (crictl ps -a)"
"$CRICTL" ps -a --name '' 2>/dev/null | grep -E "CONTAINER|$DEMO_NODE" || "$CRICTL" ps -a
echo
echo "== pod IPs"
for id in $("$CRICTL" pods --name "$DEMO_NODE" --state ready -q); do
	name=$("$CRICTL" inspectp -o go-template --template '{{.status.metadata.name}}' "$id")
	ip=$("$CRICTL" inspectp -o go-template --template '{{.status.network.ip}}' "$id")
	printf '%-28s %s\n' "$name" "$ip"
	[ "$name" = "web-$DEMO_NODE" ] && web_ip=$ip
done
if [ -n "${web_ip:-}" ]; then
	echo
	echo "== curl http://$web_ip:8080/"
	curl -fsS --max-time 3 "http://$web_ip:8080/" || echo "(web not answering yet)"
fi
echo
for c in httpd writer reader flaky; do
	id=$("$CRICTL" ps -a --name "^$c\$" -q 2>/dev/null | head -n 1)
	[ -n "$id" ] || continue
	echo "== logs of $c (crictl logs --tail 5)"
	"$CRICTL" logs --tail 5 "$id" 2>&1
done
echo
echo "== nodelet's view (pod status lines from its log)"
grep '"Pod status"' "$DEMO_DIR/nodelet.log" | tail -n 6
echo
echo "Container logs are under $DEMO_DIR/logs/<namespace>_<pod>_<uid>/<container>/<restart>.log"
echo "Add, edit or remove manifests in $DEMO_DIR/manifests/ and nodelet follows."
echo "Inspect with: source .stack/env; \$CRICTL pods. Stop with: make demo-stop (or make stack-down)."
