// Package e2e holds nodelet's own benchmarks on the local stack (Go
// benchmarks: static pod startup and RSS in standalone mode, 50 pods and
// the idle API requests of a cluster node, 100 pods' probes, the kubelet
// API through kubectl, ConfigMap propagation), run by hack/bench.sh with
// go test -run '^$' -bench ... ./bench/e2e/. They start nodelet through
// test/e2e/framework like the end-to-end tests do.
package e2e
