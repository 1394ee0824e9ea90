// Package cgroups owns the node's cgroups for pods, as the upstream kubelet's
// container manager does (pkg/kubelet/cm) with cgroupsPerQOS:
//
//   - the node allocatable cgroup kubepods under cgroupRoot, limited to the
//     node's allocatable (capacity minus kubeReserved and systemReserved
//     when enforceNodeAllocatable has "pods"), and the QoS cgroups
//     kubepods/burstable and kubepods/besteffort, created at Start in every
//     cgroup v1 hierarchy (cpuset cpus and mems copied from the parent) or
//     in the cgroup v2 tree with the controllers enabled in subtree_control;
//   - the reservations enforced on existing cgroups, as enforceNodeAllocatable
//     asks: "system-reserved" and "kube-reserved" write systemReserved and
//     kubeReserved (cpu shares, memory, pids, hugetlb) into
//     systemReservedCgroup and kubeReservedCgroup, the "-compressible"
//     twins cpu shares only;
//   - one cgroup per pod, pod<uid>, under its QoS cgroup (Guaranteed pods
//     directly under kubepods), with the pod-level cpu shares, CFS quota,
//     memory limit, pids and hugetlb limits of ResourceConfigForPod (pod
//     overhead included); its name is the sandbox's CgroupParent, so the
//     runtime puts the pod's containers below it;
//   - removing pod cgroups once empty (RemovePod) and those of pods nobody
//     knows any more (CleanupOrphans, which reads the tree only when some
//     may have been left, and otherwise every OrphanRescan);
//   - the cgroupfs and systemd drivers' naming ("/kubepods/burstable/pod<uid>"
//     and "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice").
//
// It also computes each container's CRI linux resources (ContainerResources):
// cpu shares, CFS quota and period, memory and hugepage limits and the
// oom_score_adj of the pod's QoS class.
//
// With the systemd driver every cgroup it makes (kubepods.slice, the QoS
// and pod slices) is a transient systemd unit asked of systemd over D-Bus,
// with the limits as the unit's properties, through
// github.com/opencontainers/cgroups' systemd manager, as upstream's
// libcontainer adapter does; the same manager writes the limits into the
// cgroup files. So systemd never resets them on daemon-reload, and a
// refused unit fails the pod's cgroup with systemd's reason (the pod's sync
// is retried). The cgroupfs driver writes the files directly.
//
// It reads nothing about the machine itself: the cgroup version and
// hierarchies, the capacity and the huge page sizes are internal/machine's
// facts (Config.Machine), and the allocatable of kubepods is
// machine.Allocatable of that capacity.
package cgroups
