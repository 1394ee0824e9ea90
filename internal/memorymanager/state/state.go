package state

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// MemoryTable is one memory type's accounting on a NUMA node, in bytes.
type MemoryTable struct {
	TotalMemSize   uint64 `json:"total"`
	SystemReserved uint64 `json:"systemReserved"`
	Allocatable    uint64 `json:"allocatable"`
	Reserved       uint64 `json:"reserved"`
	Free           uint64 `json:"free"`
}

// NUMANodeState is a NUMA node's memory: by type (memory,
// hugepages-<size>), how many blocks use it, and the group of nodes it is
// allocated with (itself alone while unused).
type NUMANodeState struct {
	NumberOfAssignments int                              `json:"numberOfAssignments"`
	MemoryMap           map[v1.ResourceName]*MemoryTable `json:"memoryMap"`
	Cells               []int                            `json:"cells"`
}

// NUMANodeMap is the machine's memory by NUMA node ID.
type NUMANodeMap map[int]*NUMANodeState

// Clone is a deep copy.
func (nm NUMANodeMap) Clone() NUMANodeMap {
	out := NUMANodeMap{}
	for id, s := range nm {
		if s == nil {
			out[id] = nil
			continue
		}
		c := &NUMANodeState{NumberOfAssignments: s.NumberOfAssignments, Cells: append([]int{}, s.Cells...)}
		if s.MemoryMap != nil {
			c.MemoryMap = map[v1.ResourceName]*MemoryTable{}
			for t, mt := range s.MemoryMap {
				cp := *mt
				c.MemoryMap[t] = &cp
			}
		}
		out[id] = c
	}
	return out
}

// Block is memory of one type given to a container from a group of NUMA
// nodes.
type Block struct {
	NUMAAffinity []int           `json:"numaAffinity"`
	Type         v1.ResourceName `json:"type"`
	Size         uint64          `json:"size"`
}

// ContainerMemoryAssignments are the blocks by pod UID and container name.
type ContainerMemoryAssignments map[string]map[string][]Block

// Clone is a deep copy.
func (as ContainerMemoryAssignments) Clone() ContainerMemoryAssignments {
	out := ContainerMemoryAssignments{}
	for uid, cs := range as {
		out[uid] = map[string][]Block{}
		for name, blocks := range cs {
			out[uid][name] = slices.Clone(blocks)
		}
	}
	return out
}

// PodEntry is a pod's own blocks (pod-level resources, which nodelet's
// memory manager does not pin: kept as read).
type PodEntry struct {
	MemoryBlocks []Block `json:"memoryBlocks,omitempty"`
}

// PodMemoryAssignments are the pods' own blocks by pod UID.
type PodMemoryAssignments map[string]PodEntry

// State is the memory manager's record.
type State struct {
	Policy      string
	Machine     NUMANodeMap
	Assignments ContainerMemoryAssignments
	// PodEntries are kept from the file as they were.
	PodEntries PodMemoryAssignments
}

// New is an empty state of policy.
func New(policy string) *State {
	return &State{Policy: policy, Machine: NUMANodeMap{}, Assignments: ContainerMemoryAssignments{}}
}

// Blocks are a container's blocks (nil: none).
func (s *State) Blocks(uid, container string) []Block {
	return s.Assignments[uid][container]
}

// SetBlocks records a container's blocks.
func (s *State) SetBlocks(uid, container string, blocks []Block) {
	if s.Assignments[uid] == nil {
		s.Assignments[uid] = map[string][]Block{}
	}
	s.Assignments[uid][container] = blocks
}

// Delete forgets a container's blocks.
func (s *State) Delete(uid, container string) {
	delete(s.Assignments[uid], container)
	if len(s.Assignments[uid]) == 0 {
		delete(s.Assignments, uid)
	}
}

// Pods are the UIDs with blocks, sorted.
func (s *State) Pods() []string {
	return slices.Sorted(maps.Keys(s.Assignments))
}
