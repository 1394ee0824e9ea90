#!/usr/bin/env bash
# eviction.sh AGENT: memory eviction on cgroup v2, run on the host by
# hack/vm/e2e.sh. The guest's node joins the host's control plane (as in
# node.sh) with evictionHard memory.available 600Mi; then, RUNS times, a
# BestEffort hog bound to it grows its anonymous memory 1 MiB at a time,
# as fast as the guest allows (busybox awk keeping 1 MiB strings in an
# array: about 50 MiB/s under TCG), without a limit, and the run counts as
# evicted when the pod ends Failed with reason Evicted while the guest's
# kernel OOM-killed nothing (/proc/vmstat oom_kill unchanged). cgroup v2
# has no memory threshold notification: the upstream kubelet sees the
# memory only at its 10 s housekeeping (kubernetes#106331), nodelet reads
# it every 100 ms and wakes on memory.events. Target (issue 37): evicted
# before the OOM killer in at least 9 of 10 runs.
#   VM_E2E_EVICTION_RUNS  runs per agent (default 10)
# Uses hack/vm/host/lib.sh. Prints "ok NAME: DETAIL" / "FAIL NAME: DETAIL"
# and "measure NAME VALUE" lines; exits 0 (hack/vm/e2e.sh decides).
AGENT=$1
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RUNS="${VM_E2E_EVICTION_RUNS:-10}"
THRESHOLD=600Mi
join "evictionHard: {memory.available: $THRESHOLD, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
evictionPressureTransitionPeriod: 5s" || { leave; exit 0; }

HOG='awk "BEGIN { s = sprintf(\"%1048576s\", \"\"); for (i = 0; i < 4096; i++) a[i] = s i; system(\"sleep 3600\") }"'
oom_kills() { vm_ssh "grep '^oom_kill ' /proc/vmstat" | cut -d' ' -f2; }
pressure() { k get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="MemoryPressure")].status}' 2>/dev/null; }

evicted=0 oomed=0 other=0
for i in $(seq "$RUNS"); do
	for _ in $(seq 120); do [ "$(pressure)" = False ] && break; sleep 0.5; done
	before=$(oom_kills)
	t0=$(now)
	pod "$NS" "hog-$i" "$HOG" | k apply -f - >/dev/null
	phase=""
	for _ in $(seq 360); do
		phase=$(k get pod -n "$NS" "hog-$i" -o jsonpath='{.status.phase}' 2>/dev/null)
		[ "$phase" = Failed ] || [ "$phase" = Succeeded ] && break
		sleep 0.5
	done
	took=$(since "$t0")
	st=$(k get pod -n "$NS" "hog-$i" -o jsonpath='{.status.reason} {.status.containerStatuses[0].state.terminated.reason}|{.status.message}' 2>/dev/null)
	kills=$(($(oom_kills) - before))
	if [ "$phase" = Failed ] && [ "${st%% *}" = Evicted ] && [ "$kills" = 0 ]; then
		evicted=$((evicted + 1))
		echo "    run $i: evicted after ${took}s (${st#*|})"
	elif [ "$kills" != 0 ]; then
		oomed=$((oomed + 1))
		echo "    run $i: the kernel OOM-killed $kills process(es) first; pod $phase ${st%%|*} after ${took}s"
	else
		other=$((other + 1))
		echo "    run $i: pod '$phase' ${st%%|*} after ${took}s, no OOM kill"
	fi
	echo "measure hog-$i-s $took"
	k delete pod -n "$NS" "hog-$i" --timeout=60s >/dev/null 2>&1
done
echo "measure evicted-runs $evicted"
echo "measure oom-killed-runs $oomed"
if [ $((evicted * 10)) -ge $((RUNS * 9)) ]; then
	ok "hog evicted before the OOM killer" "$evicted of $RUNS runs ($oomed OOM-killed, $other other)"
else
	fail "hog evicted before the OOM killer" "$evicted of $RUNS runs ($oomed OOM-killed, $other other); 9 in 10 wanted"
fi
msg=$(k get events -n "$NS" --field-selector reason=Evicted -o jsonpath='{.items[0].message}' 2>/dev/null)
case $msg in
"The node was low on resource: memory. Threshold quantity: $THRESHOLD, available: "*) ok "Evicted event" "$msg" ;;
*) fail "Evicted event" "'$msg'" ;;
esac
leave
