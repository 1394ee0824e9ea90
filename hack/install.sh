#!/usr/bin/env bash
# install: puts nodelet where a node operator expects a kubelet's pieces:
#   $PREFIX/bin/nodelet                                      (PREFIX=/usr/local)
#   /etc/systemd/system/nodelet.service                      (the unit)
#   /etc/systemd/system/nodelet.service.d/10-kubeadm.conf    (kubeadm's drop-in layout)
# DESTDIR stages everything under another root (packaging, tests).
# `hack/install.sh uninstall` removes them again. See docs/install.md.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

PREFIX="${PREFIX:-/usr/local}"
DESTDIR="${DESTDIR:-}"
BINDIR="$PREFIX/bin"
UNITDIR="${UNITDIR:-/etc/systemd/system}"

reload() {
	# Only when systemd runs this machine (PID 1); otherwise there is nothing to reload.
	if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then
		systemctl daemon-reload
	fi
}

if [ "${1:-}" = uninstall ]; then
	rm -f "$DESTDIR$BINDIR/nodelet" "$DESTDIR$UNITDIR/nodelet.service" "$DESTDIR$UNITDIR/nodelet.service.d/10-kubeadm.conf"
	rmdir "$DESTDIR$UNITDIR/nodelet.service.d" 2>/dev/null || true
	reload
	log "nodelet uninstalled from ${DESTDIR:-/}"
	exit 0
fi

[ -x bin/nodelet ] || go build -buildvcs=auto -o bin/nodelet ./cmd/nodelet
install -D -m 0755 bin/nodelet "$DESTDIR$BINDIR/nodelet"
for f in nodelet.service:"$UNITDIR/nodelet.service" 10-kubeadm.conf:"$UNITDIR/nodelet.service.d/10-kubeadm.conf"; do
	src="deploy/systemd/${f%%:*}" dst="$DESTDIR${f#*:}"
	mkdir -p "$(dirname "$dst")"
	sed "s#@BINDIR@#$BINDIR#g" "$src" >"$dst.tmp"
	chmod 0644 "$dst.tmp"
	mv "$dst.tmp" "$dst"
done
reload
log "installed $("$DESTDIR$BINDIR/nodelet" --version) as $DESTDIR$BINDIR/nodelet, unit $DESTDIR$UNITDIR/nodelet.service (+ nodelet.service.d/10-kubeadm.conf)"
