package pullmanager

import (
	"hash/fnv"
	"sync"
)

const (
	minStripedLockSetSize int32 = 1
	maxStripedLockSetSize int32 = 31
)

// stripedLockSet locks by string keys, each key mapped to one of a fixed
// number of mutexes.
type stripedLockSet struct {
	locks []sync.Mutex
	size  int32
}

// newStripedLockSet has size locks, size kept within [1, 31].
func newStripedLockSet(size int32) *stripedLockSet {
	size = min(maxStripedLockSetSize, max(minStripedLockSetSize, size))
	return &stripedLockSet{locks: make([]sync.Mutex, size), size: size}
}

func (s *stripedLockSet) Lock(key string)   { s.locks[keyToID(key, s.size)].Lock() }
func (s *stripedLockSet) Unlock(key string) { s.locks[keyToID(key, s.size)].Unlock() }

// GlobalLock takes every lock of the set.
func (s *stripedLockSet) GlobalLock() {
	for i := range s.locks {
		s.locks[i].Lock()
	}
}

func (s *stripedLockSet) GlobalUnlock() {
	for i := range s.locks {
		s.locks[i].Unlock()
	}
}

func keyToID(key string, sliceSize int32) uint32 {
	h := fnv.New32()
	_, _ = h.Write([]byte(key))
	return h.Sum32() % uint32(sliceSize)
}
