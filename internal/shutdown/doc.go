// Package shutdown owns graceful node shutdown, as the upstream kubelet's
// pkg/kubelet/nodeshutdown: which pods stop in which order and within what
// time when the machine shuts down (shutdownGracePeriod,
// shutdownGracePeriodCriticalPods, shutdownGracePeriodByPodPriority), and
// the status they end with.
//
// The decisions are pure functions (groups.go): the priority groups, each
// pod's group and grace period, the time asked of the system, the final
// status. The Manager (manager.go) holds a systemd-logind "delay" inhibitor
// lock over the system D-Bus (logind.go), raising InhibitDelayMaxSec when
// it is too short; on PrepareForShutdown(true) it makes the node not ready
// and refuses new pods, stops the groups lowest priority first, each within
// its period, then lets go of the lock; PrepareForShutdown(false) cancels
// what is left and takes the lock again. It keeps the last shutdown's times
// (kubelet_graceful_shutdown_{start,end}_time_seconds) in a state file.
// Without logind it says graceful shutdown is off and retries.
package shutdown
