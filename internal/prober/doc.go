// Package prober owns container probes: one worker goroutine per running
// container and probe kind (liveness, readiness, startup) that runs the
// probe (exec through CRI ExecSync, httpGet, tcpSocket, grpc) every
// periodSeconds after initialDelaySeconds, with jitter on the first run so
// that many pods do not probe in lock step, and applies the success and
// failure thresholds. Results are kept per container ID; a change is
// announced on Updates (the pod's UID) so the pod's worker syncs at once:
// readiness drives the container's ready flag, a failed liveness or startup
// probe makes the pod worker restart the container.
//
// Startup probes hold back liveness and readiness until they succeed; the
// readiness probe runs at once when the startup probe passes. Workers stop
// when their container stops running; a restarted container gets new
// workers.
//
// The Runner also runs the containers' lifecycle hooks (postStart and
// preStop: exec, httpGet, sleep) for kuberuntime, with the same handlers.
package prober
