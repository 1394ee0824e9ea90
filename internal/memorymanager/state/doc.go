// Package state owns the memory manager's record and its checkpoint,
// <root-dir>/memory_manager_state, in upstream's format (v1.37 writes v3:
// the v1 fields with their checksum, data and dataChecksum; the files of
// older kubelets, v1 and v2, are read). The package and its types carry
// upstream's names (state.MemoryManagerCheckpoint, state.NUMANodeMap,
// checksum.Checksum...) because the v1 checksum is computed over a dump of
// the Go values that spells them out.
package state
