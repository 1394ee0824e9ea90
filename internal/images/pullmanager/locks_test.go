package pullmanager

import (
	"fmt"
	"testing"
)

func TestStripedLockSetNormalizesSize(t *testing.T) {
	for size, want := range map[int32]int{-1: 1, 0: 1, 10: 10, 500: 31} {
		if got := len(newStripedLockSet(size).locks); got != want {
			t.Errorf("len(newStripedLockSet(%d).locks) = %d, want %d", size, got, want)
		}
	}
}

func TestStripedLockSetLargeRequestedSizeDoesNotPanic(t *testing.T) {
	const requestedSize int32 = 500
	s := newStripedLockSet(requestedSize)
	key := ""
	for i := range 1000 {
		if k := fmt.Sprintf("image-ref-%d", i); keyToID(k, requestedSize) >= uint32(len(s.locks)) {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key with a stripe outside the allocated range")
	}
	s.Lock(key)
	s.Unlock(key)
}
