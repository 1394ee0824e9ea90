package topologymanager

import (
	"fmt"

	"github.com/nodelet/nodelet/internal/bitmask"
)

// TopologyHint is upstream's: the NUMA nodes a resource could be given
// from and whether that is a preferred placement. A zero affinity is
// upstream's nil: no preference.
type TopologyHint struct {
	NUMANodeAffinity bitmask.Mask
	Preferred        bool
}

func (h TopologyHint) String() string {
	if h.NUMANodeAffinity == 0 {
		return fmt.Sprintf("{<nil> %t}", h.Preferred)
	}
	return fmt.Sprintf("{%s %t}", h.NUMANodeAffinity, h.Preferred)
}

// NUMADistances are the distances between NUMA nodes (sysfs'
// nodeN/distance), by node.
type NUMADistances map[int][]uint64

// NUMAInfo is the machine's NUMA nodes and their distances.
type NUMAInfo struct {
	Nodes         []int
	NUMADistances NUMADistances
}

// Narrowest is the narrower of two masks.
func (n *NUMAInfo) Narrowest(m1, m2 bitmask.Mask) bitmask.Mask {
	if m1.IsNarrowerThan(m2) {
		return m1
	}
	return m2
}

// Closest is the narrower of two masks, or, as wide, the one whose nodes
// are closer to each other on average (prefer-closest-numa-nodes).
func (n *NUMAInfo) Closest(m1, m2 bitmask.Mask) bitmask.Mask {
	if m1.Count() != m2.Count() {
		return n.Narrowest(m1, m2)
	}
	d1, d2 := n.NUMADistances.CalculateAverageFor(m1), n.NUMADistances.CalculateAverageFor(m2)
	if d1 == d2 {
		if m1 < m2 {
			return m1
		}
		return m2
	}
	if d1 < d2 {
		return m1
	}
	return m2
}

// DefaultAffinityMask is every node.
func (n NUMAInfo) DefaultAffinityMask() bitmask.Mask {
	m, _ := bitmask.New(n.Nodes...)
	return m
}

// CalculateAverageFor is the average distance between the nodes of bm.
func (d NUMADistances) CalculateAverageFor(bm bitmask.Mask) float64 {
	if bm.Count() == 0 {
		return 0
	}
	var count, sum float64
	for _, a := range bm.Bits() {
		for _, b := range bm.Bits() {
			if b < len(d[a]) {
				sum += float64(d[a][b])
			}
			count++
		}
	}
	return sum / count
}
