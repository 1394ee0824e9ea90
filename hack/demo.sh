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

go build -o bin/nodelet ./cmd/nodelet # the build cache makes it cheap; a stale binary would lack the CLI
mkdir -p "$DEMO_DIR/manifests" "$DEMO_DIR/root" "$DEMO_DIR/logs"
echo "nameserver 127.0.0.1" >"$DEMO_DIR/resolv.conf"
sed -e "s#@MANIFESTS@#$DEMO_DIR/manifests#" -e "s#@RUNTIME@#$CONTAINER_RUNTIME_ENDPOINT#" \
	-e "s#@LOGS@#$DEMO_DIR/logs#" -e "s#@RESOLV@#$DEMO_DIR/resolv.conf#" \
	examples/kubelet-config.yaml >"$DEMO_DIR/kubelet-config.yaml"
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
	# cgroup v1 (this kind of machine): nodelet, as the upstream kubelet, refuses it unless told otherwise.
	echo "failCgroupV1: false" >>"$DEMO_DIR/kubelet-config.yaml"
fi

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
nl() { bin/nodelet "$@" --root-dir "$DEMO_DIR/root"; }
echo "== pods (nodelet pods -o wide: nodelet's own view, through <root-dir>/nodelet.sock)"
nl pods -o wide
web_ip=$(nl pods -o wide | awk -v p="web-$DEMO_NODE" '$2 == p {print $7}')
if [ -n "${web_ip:-}" ] && [ "$web_ip" != "<none>" ]; then
	echo
	echo "== curl http://$web_ip:8080/"
	curl -fsS --max-time 3 "http://$web_ip:8080/" || echo "(web not answering yet)"
fi
echo
for c in "web httpd" "counter writer" "counter reader" "flaky flaky"; do
	read -r pod ctr <<<"$c"
	echo "== nodelet logs $pod -c $ctr --tail 5"
	nl logs "$pod" -c "$ctr" --tail 5 2>&1
done
echo
echo "== nodelet describe flaky (why it is not Ready, its events)"
nl describe flaky 2>&1 | sed -n '/^Not Ready:/p; /^Events:/,$p' | tail -n 8
echo
echo "== nodelet's view (pod status lines from its log)"
grep '"Pod status"' "$DEMO_DIR/nodelet.log" | tail -n 6
echo
echo "Container logs are under $DEMO_DIR/logs/<namespace>_<pod>_<uid>/<container>/<restart>.log"
echo "Add, edit or remove manifests in $DEMO_DIR/manifests/ and nodelet follows."
echo "Inspect with: bin/nodelet pods|describe|logs|exec ... --root-dir $DEMO_DIR/root (or crictl: source .stack/env; \$CRICTL pods)."
echo "Stop with: make demo-stop (or make stack-down)."
