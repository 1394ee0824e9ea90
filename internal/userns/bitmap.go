package userns

import (
	"math/bits"
	"math/rand/v2"
)

// bitmap is the set of the kubelet range's blocks in use, as upstream's
// allocator.AllocationBitmap with its random scan: allocateNext starts at
// a random block and takes the first free one from there, wrapping round.
type bitmap struct {
	max   int
	count int
	words []uint64
	// intN returns a number in [0, n); rand.IntN unless a test sets it.
	intN func(n int) int
}

func newBitmap(max int) *bitmap {
	return &bitmap{max: max, words: make([]uint64, (max+63)/64), intN: rand.IntN}
}

func (b *bitmap) has(i int) bool {
	if i < 0 || i >= b.max {
		return false
	}
	return b.words[i/64]&(1<<(uint(i)%64)) != 0
}

// allocate marks block i used; false when it was already, or is out of
// range.
func (b *bitmap) allocate(i int) bool {
	if i < 0 || i >= b.max || b.has(i) {
		return false
	}
	b.words[i/64] |= 1 << (uint(i) % 64)
	b.count++
	return true
}

// allocateNext marks a free block used and returns it; false when all are
// used.
func (b *bitmap) allocateNext() (int, bool) {
	if b.count >= b.max {
		return 0, false
	}
	start := b.intN(b.max)
	for i := 0; i < b.max; i++ {
		at := (start + i) % b.max
		if !b.has(at) {
			b.allocate(at)
			return at, true
		}
	}
	return 0, false
}

// release frees block i; freeing a free or out-of-range block does nothing.
func (b *bitmap) release(i int) {
	if !b.has(i) {
		return
	}
	b.words[i/64] &^= 1 << (uint(i) % 64)
	b.count--
}

// used counts the blocks in use (for tests).
func (b *bitmap) used() int {
	n := 0
	for _, w := range b.words {
		n += bits.OnesCount64(w)
	}
	return n
}
