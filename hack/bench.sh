#!/usr/bin/env bash
# bench: runs the benchmarks against the local stack and writes the results
# to docs/benchmarks.md (raw `go test -bench` output included).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
need_root
bash hack/stack-up.sh
out=$(mktemp)
go test -count=1 -run '^$' -bench . -benchtime 20x ./test/e2e/ | tee "$out"
metric() { awk -v b="$1" -v m="$2" '$1 ~ "^"b"-" { for (i = 1; i <= NF; i++) if ($i == m) print $(i-1) }' "$out"; }
{
	echo "# Benchmarks"
	echo
	echo "Written by \`make bench\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB,"
	echo "$(containerd --version | awk '{print $1, $3}'), runc $(runc --version | awk 'NR==1 {print $3}'), $(go version | awk '{print $3}'))."
	echo
	echo "## Standalone mode"
	echo
	echo "| figure | value |"
	echo "|---|---|"
	echo "| manifest written -> container running, median of 20 | $(metric BenchmarkStaticPodStartup p50-ms) ms |"
	echo "| same, p90 / max | $(metric BenchmarkStaticPodStartup p90-ms) / $(metric BenchmarkStaticPodStartup max-ms) ms |"
	echo "| nodelet RSS with 10 running pods | $(metric BenchmarkRSS10Pods RSS-MiB) MiB |"
	echo
	echo "Startup is measured from writing the manifest (atomically, by rename) to the container's"
	echo "StartedAt as containerd reports it; images are already present. The side-by-side comparison"
	echo "with the upstream kubelet comes with cluster mode."
	echo
	echo "## Raw output"
	echo
	echo '```'
	cat "$out"
	echo '```'
} >docs/benchmarks.md
rm -f "$out"
log "wrote docs/benchmarks.md"
