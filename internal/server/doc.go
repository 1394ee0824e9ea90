// Package server owns the kubelet API: HTTPS on address:port (10250) with
// x509 and TokenReview authentication and SubjectAccessReview authorization
// on the nodes/<subresource> of this node, as the upstream kubelet does, and
// the optional unauthenticated read-only port.
//
// It serves /healthz, /pods, /runningpods/, /containerLogs (reading the CRI
// log files), /exec, /attach, /portForward and /run (asking the runtime for a
// streaming URL and proxying the upgraded connection to it, so SPDY and
// WebSocket clients work as with upstream), /stats/summary, /metrics,
// /metrics/resource, /metrics/probes, /configz, /debug/pprof/ and /logs/.
//
// The server reads nodelet's state only through the Host interface and the
// CRI runtime service; it never changes desired state. Every handler is safe
// to run concurrently with the others.
package server
