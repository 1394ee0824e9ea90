// Package stats owns the node's resource usage figures: the data behind the
// kubelet's /stats/summary endpoint (statsv1alpha1.Summary) and the
// /metrics/resource Prometheus collector that metrics-server scrapes, with the
// semantics of the upstream kubelet's CRI stats provider.
//
// Where the figures come from:
//
//   - Node CPU and memory: the root cgroup where cgroups are mounted
//     (Config.Machine.Cgroups), cgroup v1 (cpuacct and memory hierarchies)
//     or the cgroup v2 unified hierarchy, whichever internal/machine found.
//     The working set is usage minus inactive file pages, clamped at 0, as
//     cAdvisor computes it; availableBytes is MemTotal (a machine fact)
//     minus the working set. The node's startTime is the machine's boot
//     time. Swap: <proc>/meminfo.
//   - Node network: <proc>/net/dev, without the interfaces cAdvisor ignores
//     (lo, veth*, docker*, nerdctl*); eth0 is the default interface.
//   - Node fs: statfs of Config.RootDir. Runtime imageFs/containerFs: the
//     runtime's ImageFsInfo, with capacity and available bytes from statfs of
//     the reported mount point. Rlimit: pid_max/threads-max and the task count
//     of /proc/loadavg.
//   - Pods and containers: ListPodSandboxStats (pod cgroup CPU and memory,
//     network of the default interface, process count) when the runtime
//     implements it, else ListContainerStats with the pod summed from its
//     containers, as upstream falls back. containerd 1.6 fails the whole
//     ListPodSandboxStats call when any sandbox was created without a
//     cgroup parent, so any error also falls back, and the call is tried
//     again 5 minutes later. As upstream, a pod is its ready sandbox (or its
//     newest one), and only running containers are reported.
//   - Container logs: the files under <PodLogsDir>/<ns>_<name>_<uid>/<container>.
//   - Volumes: emptyDir, configMap, secret, projected and downwardAPI volumes
//     under PodInfo.VolumeDir, measured by a du-like walk cached for a minute
//     per volume. Ephemeral storage is the containers' writable layers and
//     logs, the pod's log files and etc-hosts, and its local ephemeral volumes
//     (disk-backed emptyDir, configMap, gitRepo), as upstream adds them.
//
// PSI (pressure stall information, KEP-4205, GA in 1.36): the cpu, memory
// and io fields' psi are read from the cgroup v2 pressure files, as upstream
// reports cAdvisor's: the node's from the root cgroup, the "pods" system
// container's memory from the pods' cgroup, a pod's and a container's from
// their own cgroups (found below the pods' cgroup by pod UID and container
// ID, either driver's names), else the runtime's PSI where CRI gives it.
// Total is the kernel's cumulative stall in microseconds, the averages
// percentages; "full" of cpu.pressure is 0 before Linux 5.13. Where the
// kernel has no pressure files (cgroup v1, PSI off) a found cgroup's PSI is
// zero, not nil, as upstream's cAdvisor-based figures are. /metrics/cadvisor
// serves cadvisor's container_pressure_{cpu,memory,io}_{stalled,waiting}_seconds_total
// ("full" and "some" totals in seconds) only where the root cgroup has
// cpu.pressure, as upstream decides.
//
// usageNanoCores is computed here from the cumulative counters (the runtime's
// own figure, when it gives one, depends on whichever client called last):
// the provider keeps, per node, sandbox and container, the sample its last
// rate was computed from and reports the rate against it; windows shorter
// than a second reuse the last rate so that concurrent callers do not make it
// jitter. When Summary meets a node, pod or container for which no rate is
// known yet it samples everything again 100ms later, so the first answer
// already carries rates. Entries of sandboxes and containers that are gone
// are dropped on every call, so the cache stays as large as what runs.
//
// Provider is safe for concurrent use.
package stats
