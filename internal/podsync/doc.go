// Package podsync owns the orchestration of one pod: what a pod worker runs
// for it. SyncPod reads what the runtime has, keeps a static pod's mirror
// pod, sets up the volumes, has the runtime (kuberuntime) create, start and
// kill what the spec asks, starts the probes of running containers and
// records the computed status (status.Generate) in the status store; it
// fails a pod past its activeDeadlineSeconds, never restarts a pod the API
// reports terminal, and reports a volume that cannot be set up (FailedMount).
// StopPod stops a pod within its grace period; CleanupPod writes a deleted
// pod's final status and removes what is left of it (containers, sandboxes,
// cgroups, volumes, caches).
//
// It also remembers what each pod's last sync saw (observed), so the main
// loop can drop PLEG events that report nothing new, and when each pod was
// first synced (kubelet_pod_start_duration_seconds).
//
// Its collaborators are small interfaces given in Config (the runtime, the
// volumes, the prober, the status store, the mirror pods, the cgroups) and
// a clock, so every branch is unit tested with fakes.
package podsync
