package bitmask

import (
	"fmt"
	"math/bits"
	"strconv"
)

// Mask is a set of NUMA node IDs (bit i set: node i). The zero Mask is
// empty.
type Mask uint64

// New is the mask of ids; an ID outside 0-63 is an error.
func New(ids ...int) (Mask, error) {
	var m Mask
	for _, i := range ids {
		if i < 0 || i >= 64 {
			return 0, fmt.Errorf("bit number must be in range 0-63")
		}
		m |= 1 << uint(i)
	}
	return m, nil
}

// Count is the number of nodes in m.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// IsSet tells whether node id is in m.
func (m Mask) IsSet(id int) bool { return id >= 0 && id < 64 && m&(1<<uint(id)) != 0 }

// Bits are m's node IDs, ascending.
func (m Mask) Bits() []int {
	var out []int
	for i := range 64 {
		if m.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// IsNarrowerThan is upstream's order of hints: fewer nodes, or as many
// and a lower mask.
func (m Mask) IsNarrowerThan(o Mask) bool {
	if m.Count() == o.Count() {
		return m < o
	}
	return m.Count() < o.Count()
}

// String is upstream's rendering: binary, in groups of two digits
// ("01", "0011").
func (m Mask) String() string {
	const grouping = 2
	for shift := 64 - grouping; shift > 0; shift -= grouping {
		if m > (1 << uint(shift)) {
			return fmt.Sprintf("%0"+strconv.Itoa(shift+grouping)+"b", uint64(m))
		}
	}
	return fmt.Sprintf("%0"+strconv.Itoa(grouping)+"b", uint64(m))
}

// Iterate calls f with every non-empty subset of ids, by size then in
// the order of ids (upstream's IterateBitMasks): the order hints are
// generated in, which breaks ties.
func Iterate(ids []int, f func(Mask)) {
	var iterate func(rest, accum []int, size int)
	iterate = func(rest, accum []int, size int) {
		if len(accum) == size {
			m, _ := New(accum...)
			f(m)
			return
		}
		for i := range rest {
			iterate(rest[i+1:], append(accum, rest[i]), size)
		}
	}
	for size := 1; size <= len(ids); size++ {
		iterate(ids, nil, size)
	}
}
