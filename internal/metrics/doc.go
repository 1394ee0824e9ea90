// Package metrics owns nodelet's Prometheus metrics, with the upstream
// kubelet's names where they mean the same. Registries are split as the
// upstream kubelet serves them: Kubelet for /metrics, Probes for
// /metrics/probes (the /metrics/resource collector lives in internal/stats).
//
// Help strings start with the stability level upstream's component-base
// adds to them ("[ALPHA] ", "[BETA] ", "[STABLE] "), so that the HELP lines
// are upstream's byte for byte.
package metrics
