#!/usr/bin/env bash
# status: what the running guest is, checked: systemd's state, cgroup v2,
# containerd 2 and runc, the CRI runtime ready with SystemdCgroup, and the
# host's services seen from the guest. Fails when the guest is not a working
# node (not cgroup v2, containerd not ready, runc not systemd-driven).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vm_running || die "no guest runs (make vm-up)"
vm_ssh bash -s <<'GUEST'
set -u
fail=0
say() { printf '  %-34s %s\n' "$1" "$2"; }
state=$(timeout 120 systemctl is-system-running --wait 2>/dev/null)
say "systemctl is-system-running" "$state"
if [ "$state" != running ]; then
	systemctl --failed --no-legend --plain | sed 's/^/    failed unit: /'
fi
say "systemd-analyze" "$(systemd-analyze 2>/dev/null | head -n1)"
say "kernel" "$(uname -r), $(nproc) CPUs, $(free -m | awk '/^Mem:/ {print $2}') MiB"
fs=$(stat -fc %T /sys/fs/cgroup)
say "stat -fc %T /sys/fs/cgroup" "$fs"
[ "$fs" = cgroup2fs ] || { echo "  ERROR: the guest is not on cgroup v2"; fail=1; }
say "containerd --version" "$(containerd --version 2>&1)"
say "runc --version" "$(runc --version 2>&1 | paste -sd' ')"
say "crictl --version" "$(crictl --version 2>&1)"
info=$(crictl info 2>&1)
if ready=$(jq -r '[.status.conditions[] | "\(.type)=\(.status)"] | join(" ")' <<<"$info" 2>/dev/null); then
	say "crictl info conditions" "$ready"
	sc=$(jq -r '.config.containerd.runtimes.runc.options.SystemdCgroup' <<<"$info")
	say "crictl info runc SystemdCgroup" "$sc"
	say "crictl runtime-config" "$(crictl runtime-config 2>&1 | tr -s ' ' | paste -sd' ')"
	[[ "$ready" == *RuntimeReady=true* ]] || { echo "  ERROR: containerd's runtime is not ready"; fail=1; }
	[ "$sc" = true ] || { echo "  ERROR: runc is not configured with SystemdCgroup = true"; fail=1; }
else
	echo "$info" | tail -n 5 | sed 's/^/    /'
	echo "  ERROR: crictl info failed (containerd: $(systemctl is-active containerd))"
	fail=1
fi
say "swap" "$(swapon --show=NAME --noheadings | paste -sd' ' | sed 's/^$/off (swapon \/swapfile turns it on)/')"
. /etc/nodelet-test-bed.env
for p in $FORWARDED_PORTS; do
	case $p in 6443) url=https://127.0.0.1:6443/healthz ;; *) url=http://127.0.0.1:$p/v2/ ;; esac
	code=$(curl -sk -o /dev/null -m 5 -w '%{http_code}' "$url" 2>/dev/null)
	case $code in 000 | "") say "host 127.0.0.1:$p from the guest" "not answering (not running on the host?)" ;;
	*) say "host 127.0.0.1:$p from the guest" "HTTP $code ($url)" ;; esac
done
exit $fail
GUEST
