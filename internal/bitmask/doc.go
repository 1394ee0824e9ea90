// Package bitmask owns the NUMA node masks the resource managers reason
// with (upstream's pkg/kubelet/cm/topologymanager/bitmask): a set of NUMA
// node IDs 0-63 with upstream's ordering (narrower is fewer nodes, then
// the lower mask) and its enumeration of every non-empty subset by size.
package bitmask
