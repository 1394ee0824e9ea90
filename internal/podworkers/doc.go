// Package podworkers owns the per-pod goroutines. Each pod has exactly one
// worker; the worker is the only goroutine that changes that pod in the
// runtime, so syncs and terminations of one pod never overlap while
// different pods proceed in parallel.
//
// A worker runs its Syncer's SyncPod whenever it is woken (a new spec, a
// PLEG event, a requested requeue) and at least every resync period. Once
// asked to terminate it cancels an in-flight sync, calls StopPod and then
// CleanupPod until both succeed (retrying with back-off), reports the pod
// finished and exits; later updates for that UID are ignored until Forget.
// A shorter grace period restarts a StopPod in flight, never a cleanup.
//
// Concurrency: all exported methods are safe for concurrent use; the Syncer
// is called only from worker goroutines, never twice at once for one pod.
package podworkers
