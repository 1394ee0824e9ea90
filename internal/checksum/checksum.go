// Package checksum owns the checksums of upstream's kubelet checkpoints
// (pkg/kubelet/checkpointmanager/checksum), so that the files nodelet
// writes in the root directory (allocated_pods_state, actuated_pods_state,
// cpu_manager_state) verify in the upstream kubelet and the other way
// round: FNV-32a of the value's hash dump (k8s.io/utils/dump.ForHash).
package checksum

import (
	"fmt"
	"hash/fnv"

	"k8s.io/utils/dump"
)

// String is upstream's checksum.New of a string (the data section of the
// newer checkpoints).
func String(data string) uint64 {
	return OfDump(dump.ForHash(data))
}

// OfDump is the checksum of a hash dump already spelled out, for the
// structs of upstream's whose dump names upstream's own types.
func OfDump(dumped string) uint64 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dumped)
	return uint64(h.Sum32())
}

// Checksum is upstream's checksum.Checksum: a struct of nodelet's with a
// field of this type dumps as upstream's does ("(checksum.Checksum)0").
type Checksum uint64
