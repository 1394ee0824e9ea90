#!/usr/bin/env bash
# bench: runs the benchmarks against the local stack and writes the results
# to docs/benchmarks.md (raw `go test -bench` output included).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
need_root
bash hack/stack-up.sh
bash hack/cluster/up.sh
# shellcheck source=/dev/null
source "$STACK_DIR/env"
K8S_BIN_DIR="$REPO_ROOT/.cache/k8s/${K8S_VERSION:-v1.37.2}/bin"
out=$(mktemp)
if [ -n "${BENCH_E2E_RESULTS:-}" ]; then
	# Only the comparison again: the go test -bench output of an earlier run
	# of this script (same nodelet code) is reused.
	cp "$BENCH_E2E_RESULTS" "$out"
else
	go test -count=1 -timeout 30m -run '^$' -bench 'BenchmarkStaticPodStartup|BenchmarkRSS10Pods' -benchtime 20x ./bench/e2e/ | tee "$out"
	go test -count=1 -timeout 30m -run '^$' -bench 'BenchmarkClusterNode50Pods' -benchtime 1x ./bench/e2e/ | tee -a "$out"
	go test -count=1 -timeout 30m -run '^$' -bench 'BenchmarkProbes100Pods' -benchtime 1x ./bench/e2e/ | tee -a "$out"
	go test -count=1 -timeout 30m -run '^$' -bench 'BenchmarkKubeletAPI' -benchtime 1x ./bench/e2e/ | tee -a "$out"
	go test -count=1 -timeout 30m -run '^$' -bench 'BenchmarkConfigMapPropagation' -benchtime 1x ./bench/e2e/ | tee -a "$out"
fi
# nodelet vs the upstream kubelet, side by side on node bench-node (bench/compare):
# raw results in bench/results/compare.json, charts and profiles under docs/.
go run ./bench/compare -reps "${BENCH_COMPARE_REPS:-3}" -scale "${BENCH_COMPARE_SCALE:-250,500}" \
	-out bench/results/compare.json -section bench/results/compare.md -docs-dir docs
# Node pressure, side by side (bench/pressure): raw runs in
# bench/results/pressure.json.
go run ./bench/pressure -memory-runs "${BENCH_PRESSURE_MEMORY_RUNS:-10}" -runs "${BENCH_PRESSURE_RUNS:-3}" \
	-out bench/results/pressure.json -section bench/results/pressure.md
# TLS bootstrap, side by side (bench/bootstrap).
go run ./bench/bootstrap -reps "${BENCH_BOOTSTRAP_REPS:-5}" -out bench/results/bootstrap.json -section bench/results/bootstrap.md
# Certificate rotation, side by side (bench/rotation; ~3 minutes per agent).
go run ./bench/rotation -out bench/results/rotation.json -section bench/results/rotation.md
# CSI driver registration, side by side (bench/csiregistration).
go run ./bench/csiregistration -reps "${BENCH_CSIREG_REPS:-3}" -out bench/results/csiregistration.json -section bench/results/csiregistration.md
# Pods with a CSI persistent volume, side by side (bench/csivolume).
go run ./bench/csivolume -reps "${BENCH_CSIVOL_REPS:-10}" -out bench/results/csivolume.json -section bench/results/csivolume.md
# Graceful node shutdown, side by side (bench/shutdown).
go run ./bench/shutdown -reps "${BENCH_SHUTDOWN_REPS:-3}" -cancels "${BENCH_SHUTDOWN_CANCELS:-2}" \
	-out bench/results/shutdown.json -section bench/results/shutdown.md
# Offline autonomy, side by side (bench/offline; ~5 minutes per agent).
go run ./bench/offline -out bench/results/offline.json -section bench/results/offline.md
# What the ecosystem reads (/metrics/cadvisor, the pod-resources API), side by side (bench/ecosystem).
go run ./bench/ecosystem -out bench/results/ecosystem.json -section bench/results/ecosystem.md
# Device plugins, side by side (bench/deviceplugin).
go run ./bench/deviceplugin -out bench/results/deviceplugin.json -section bench/results/deviceplugin.md
# In-place resize, side by side (bench/resize).
go run ./bench/resize -resizes "${BENCH_RESIZES:-50}" -out bench/results/resize.json -section bench/results/resize.md
metric() { awk -v b="$1" -v m="$2" '$1 ~ "^"b"-" { for (i = 1; i <= NF; i++) if ($i == m) print $(i-1) }' "$out"; }
{
	echo "# Benchmarks"
	echo
	echo "Written by \`make bench\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB,"
	echo "$("${CONTAINERD:-containerd}" --version | awk '{print $1, $3}'), runc $("${RUNC:-runc}" --version | awk 'NR==1 {print $3}'), $(go version | awk '{print $3}'))."
	echo
	echo "The stack's runtime is \`STACK_RUNTIME=${STACK_RUNTIME:-containerd1}\`: since 2026-12-07 containerd 2 with runc, both"
	echo "built from the Go module proxy (docs/testing.md); results written before that date were measured on Debian's"
	echo "containerd 1.6.20 and runc 1.1.5 (\`STACK_RUNTIME=containerd1\` runs them there again)."
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
	echo "StartedAt as containerd reports it; images are already present."
	echo
	echo "## Cluster mode (local control plane $(basename "$(dirname "$K8S_BIN_DIR")"), 50 pods)"
	echo
	echo "| figure | value |"
	echo "|---|---|"
	echo "| pod created -> watch shows it Running (scheduled by kube-scheduler), p50 of 50 | $(metric BenchmarkClusterNode50Pods start-p50-ms) ms |"
	echo "| same, p99 / max | $(metric BenchmarkClusterNode50Pods start-p99-ms) / $(metric BenchmarkClusterNode50Pods start-max-ms) ms |"
	echo "| API requests in one idle minute with 50 pods (API server audit log) | $(metric BenchmarkClusterNode50Pods api-req/min) |"
	echo "| nodelet RSS with 50 running pods | $(metric BenchmarkClusterNode50Pods RSS-MiB) MiB |"
	echo
	echo "Pods are created one after the other; each is bound by kube-scheduler and run by nodelet."
	echo "The e2e configuration renews the node lease every 5 s (nodeLeaseDurationSeconds: 20,"
	echo "because the test controller manager marks a node Unknown after 10 s), so 12 of the idle"
	echo "requests per minute are lease renewals; with the default 40 s lease it is 6."
	echo "The side-by-side comparison with the upstream kubelet is the next section."
	echo
	echo "## Probes: 100 pods, a liveness and an http readiness probe every second each"
	echo
	echo "| figure | exec liveness (the issue's load) | http liveness (same rate, no runc) |"
	echo "|---|---|---|"
	E=BenchmarkProbes100Pods/exec-liveness H=BenchmarkProbes100Pods/http-liveness
	echo "| nodelet CPU over 60 s of steady state (% of one core) | $(metric $E cpu-%core) | $(metric $H cpu-%core) |"
	echo "| containerd + shims (+ the runc they reaped), % of one core | $(metric $E runtime-cpu-%core) | $(metric $H runtime-cpu-%core) |"
	echo "| whole machine busy (% of 2 cores) | $(metric $E machine-busy-%) | $(metric $H machine-busy-%) |"
	echo "| probes run per second (200 expected) | $(metric $E probes/s) | $(metric $H probes/s) |"
	echo "| probe failures in that minute | $(metric $E failed-probes/min) | $(metric $H failed-probes/min) |"
	echo "| probes run more than one period late in that minute | $(metric $E late-probes/min) | $(metric $H late-probes/min) |"
	echo "| highest container restart count (should be 0) | $(metric $E max-restarts) | $(metric $H max-restarts) |"
	echo
	echo 'Standalone static pods. An exec probe is a `runc exec` inside containerd 1.6 (a new runc process,'
	echo "a new process in the container). The second column runs the same number of probes with http"
	echo "liveness instead: what nodelet's prober does on its own. The runtime's CPU and the machine's"
	echo "load show where the time goes when exec probes fall behind."
	echo
	echo "## Kubelet API through the API server (kubectl)"
	echo
	echo "| figure | value |"
	echo "|---|---|"
	echo "| \`kubectl exec POD -- true\`, median of 20 | $(metric BenchmarkKubeletAPI exec-p50-ms) ms |"
	echo "| \`kubectl logs -f\` on a container writing as fast as it can (\`yes\`, 100-byte lines) | $(metric BenchmarkKubeletAPI logs-f-MiB/s) MiB/s |"
	echo "| the same container's log file growth, as containerd writes it | $(metric BenchmarkKubeletAPI runtime-log-MiB/s) MiB/s |"
	echo
	echo "kubectl, the API server, nodelet and the writer share the two cores. nodelet sends followed"
	echo "logs in chunks at most 10 ms apart instead of one flush per line (3-8 MiB/s before that change)."
	echo
	echo "## Volumes"
	echo
	echo "| figure | value |"
	echo "|---|---|"
	echo "| ConfigMap updated in the API -> new content in a running pod's volume, median of 10 | $(metric BenchmarkConfigMapPropagation p50-s) s |"
	echo "| same, min / max | $(metric BenchmarkConfigMapPropagation min-s) / $(metric BenchmarkConfigMapPropagation max-s) s |"
	echo
	echo "With the e2e configuration's syncFrequency of 30 s: updates land at the pod's next periodic sync."
	echo
	echo "<!-- compare: begin (bench/compare) -->"
	cat bench/results/compare.md
	echo "<!-- compare: end -->"
	echo
	echo "<!-- pressure: begin (bench/pressure) -->"
	cat bench/results/pressure.md
	echo "<!-- pressure: end -->"
	echo
	echo "<!-- bootstrap: begin (bench/bootstrap) -->"
	cat bench/results/bootstrap.md
	echo "<!-- bootstrap: end -->"
	echo
	echo "<!-- rotation: begin (bench/rotation) -->"
	cat bench/results/rotation.md
	echo "<!-- rotation: end -->"
	echo
	echo "<!-- csiregistration: begin (bench/csiregistration) -->"
	cat bench/results/csiregistration.md
	echo "<!-- csiregistration: end -->"
	echo
	echo "<!-- csivolume: begin (bench/csivolume) -->"
	cat bench/results/csivolume.md
	echo "<!-- csivolume: end -->"
	echo
	echo "<!-- shutdown: begin (bench/shutdown) -->"
	cat bench/results/shutdown.md
	echo "<!-- shutdown: end -->"
	echo
	echo "<!-- offline: begin (bench/offline) -->"
	cat bench/results/offline.md
	echo "<!-- offline: end -->"
	echo
	echo "<!-- ecosystem: begin (bench/ecosystem) -->"
	cat bench/results/ecosystem.md
	echo "<!-- ecosystem: end -->"
	echo
	echo "<!-- deviceplugin: begin (bench/deviceplugin) -->"
	cat bench/results/deviceplugin.md
	echo "<!-- deviceplugin: end -->"
	echo
	echo "<!-- resize: begin (bench/resize) -->"
	cat bench/results/resize.md
	echo "<!-- resize: end -->"
	echo
	echo "## Raw output"
	echo
	echo '```'
	cat "$out"
	echo '```'
} >docs/benchmarks.md
rm -f "$out"
log "wrote docs/benchmarks.md"
