#!/usr/bin/env bash
# cgroups.sh AGENT BINARY: runs in the test bed's guest (piped over ssh by
# hack/vm/e2e.sh). Starts BINARY (nodelet, or the upstream kubelet) standalone
# as a transient systemd unit with cgroupDriver: cgroupfs in its
# configuration (containerd 2 reports systemd: the agent must take the
# runtime's driver) and one static Burstable pod (requests cpu 100m, memory
# 32Mi; limits cpu 200m, memory 64Mi), then checks what an operator checks:
# the pod's slice is a unit the agent asked systemd for over D-Bus with its
# limits as unit properties, the pod cgroup's and the container's limits, the
# same after systemctl daemon-reload and after a containerd restart (the
# container kept), and the unit and cgroup gone once the manifest is removed.
# Uses hack/vm/guest/lib.sh (piped before it). Prints one line per check: "ok NAME: DETAIL" or "FAIL NAME: DETAIL", and
# "measure NAME VALUE" lines; exits 0 (the host decides).
set -u
AGENT=$1 BIN=$2
UNIT=e2e-$AGENT
ETC=/etc/e2e-$AGENT
ROOT=/var/lib/e2e-$AGENT
case $AGENT in
nodelet) POD_UID=11111111-2222-3333-4444-555555555555 ;;
*) POD_UID=22222222-3333-4444-5555-666666666666 ;;
esac
SLICE=kubepods-burstable-pod${POD_UID//-/_}.slice
CG=/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/$SLICE

agent_cleanup
static_pod burst "$POD_UID" "{cpu: 100m, memory: 32Mi}" "{cpu: 200m, memory: 64Mi}"
crictl pull docker.io/library/busybox:1.36 >/dev/null 2>&1 || fail image "cannot pull docker.io/library/busybox:1.36 (the host's registry)"

t0=$(now)
agent_start cgroupfs || { fail start "systemd-run $BIN failed"; exit 0; }
ctr=$(wait_running "$POD_UID" 180)
if [ -z "$ctr" ]; then
	fail pod-running "no running container after 180 s; $AGENT: $(systemctl is-active "$UNIT"); last log lines:"
	agent_log -n 15 | sed 's/^/    /'
	agent_cleanup
	exit 0
fi
ok pod-running "container ${ctr:0:12}"
echo "measure pod-running-s $(since "$t0")"

if agent_log | grep -q 'Using cgroup driver setting received from the CRI runtime'; then
	ok driver-from-runtime "configured cgroupfs, the runtime's systemd used"
else
	fail driver-from-runtime "no \"Using cgroup driver setting received from the CRI runtime\" in its log"
fi
for s in kubepods.slice kubepods-burstable.slice kubepods-besteffort.slice; do
	check "unit $s" "active libcontainer container $s" "$(prop $s ActiveState) $(prop $s Description)"
done

limits() { # limits WHEN
	check "$1 / pod unit created over D-Bus" "libcontainer container $SLICE" "$(prop "$SLICE" Description)"
	check "$1 / pod unit MemoryMax" 67108864 "$(prop "$SLICE" MemoryMax)"
	check "$1 / pod unit CPUQuotaPerSecUSec" 200ms "$(prop "$SLICE" CPUQuotaPerSecUSec)"
	check "$1 / pod cgroup memory.max" 67108864 "$(cat "$CG/memory.max" 2>&1)"
	check "$1 / pod cgroup cpu.max" "20000 100000" "$(cat "$CG/cpu.max" 2>&1)"
	check "$1 / pod cgroup cpu.weight" 4 "$(cat "$CG/cpu.weight" 2>&1)"
	local scope
	scope=$(ls -d "$CG"/cri-containerd-"$ctr"*.scope 2>/dev/null | head -1)
	check "$1 / container memory.max" 67108864 "$(cat "$scope/memory.max" 2>&1)"
	check "$1 / container cpu.max" "20000 100000" "$(cat "$scope/cpu.max" 2>&1)"
}
limits start
systemctl daemon-reload
sleep 2
limits daemon-reload
systemctl restart containerd
for _ in $(seq 60); do crictl info >/dev/null 2>&1 && break; sleep 1; done
sleep 5
check "containerd-restart / container kept" "${ctr:0:12}" "$(running_ctr "$POD_UID" | cut -c1-12)"
limits containerd-restart

t1=$(now)
rm "$ETC/manifests/burst.yaml"
gone=""
for _ in $(seq 120); do
	if [ "$(prop "$SLICE" LoadState)" = not-found ] && [ ! -d "$CG" ]; then gone=1; break; fi
	sleep 1
done
if [ -n "$gone" ]; then
	ok removed "the pod's unit and cgroup gone $(since "$t1") s after its manifest"
else
	fail removed "after 120 s: unit $(prop "$SLICE" LoadState)/$(prop "$SLICE" ActiveState), cgroup $([ -d "$CG" ] && echo present || echo gone)"
fi
agent_log -p err | grep -v '^-- ' | head -5 | sed 's/^/    log: /'
agent_cleanup
