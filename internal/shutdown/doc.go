// Package shutdown owns graceful node shutdown, as the upstream kubelet's
// pkg/kubelet/nodeshutdown: which pods stop in which order and within what
// time when the machine shuts down (shutdownGracePeriod,
// shutdownGracePeriodCriticalPods, shutdownGracePeriodByPodPriority), and
// the status they end with.
//
// So far it has the decisions (pure functions): the priority groups, each
// pod's group and grace period, the time asked of the system, the final
// status. The logind inhibitor over D-Bus, the PrepareForShutdown watch,
// the node's not-ready condition and the admission refusal are still to
// come (issue 18).
package shutdown
