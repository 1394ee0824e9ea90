// Package machine owns the facts about the machine nodelet runs on, read
// once at startup (Read) from procfs, sysfs, the cgroup mount and the host's
// /etc, each root injectable for tests:
//
//   - capacity: the CPU count, MemTotal, the huge pages reserved of each
//     page size (nr_hugepages), pid_max, and the size of the filesystem of
//     the kubelet's root directory (ephemeral storage);
//   - cgroups: where they are mounted, whether the unified hierarchy (v2)
//     is, and the hierarchies pods' cgroups are made in;
//   - identity: machine ID, system UUID, boot ID and boot time, kernel
//     release and OS image.
//
// It also owns the reservation arithmetic (Allocatable): capacity minus
// kubeReserved, systemReserved and the hard eviction thresholds.
//
// cm, nodestatus and stats take these facts from here through their Config
// and read none of them themselves; what changes while nodelet runs (cgroup
// counters, free memory, load, filesystem usage) is theirs to read. Facts
// is a plain value, read-only once made, safe to share.
package machine
