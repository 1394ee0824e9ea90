// Package eviction owns the node's resource pressure, as the upstream
// kubelet's eviction manager: the thresholds of the configuration
// (evictionHard, evictionSoft with their grace periods, minimum reclaims;
// upstream's defaults and merge rule), the signals observed from the stats
// summary every monitoring period (memory.available,
// allocatableMemory.available, nodefs/imagefs/containerfs available and
// inodes free, pid.available), the thresholds met, and the node conditions
// they raise (MemoryPressure, DiskPressure, PIDPressure), kept for the
// pressure transition period after the signal recovers. nodestatus reports
// the conditions; admission rejects pods under them as upstream (reason
// Evicted).
//
// The decisions (parsing, which thresholds are met, grace periods,
// conditions, admission) are pure functions, table tested; the Manager only
// observes and stores.
package eviction
