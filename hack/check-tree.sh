#!/usr/bin/env bash
# Fails when a tracked file is a build output: an ELF binary, or any file
# over 5 MiB (bench/results and docs/profiles are small and stay).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
bad=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	size=$(stat -c %s "$f")
	if [ "$size" -gt $((5 * 1024 * 1024)) ]; then
		log "tracked file over 5 MiB: $f ($size bytes)"
		bad=1
	fi
	if [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
		log "tracked ELF binary: $f"
		bad=1
	fi
done < <(git ls-files -z)
[ "$bad" = 0 ] || die "build output is tracked: git rm --cached it and ignore it"
