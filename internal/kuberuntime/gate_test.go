package kuberuntime

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// TestStartGate runs in a synctest bubble: after synctest.Wait every waiter
// is either served or blocked in acquire, so "nobody was served" is a fact,
// not the outcome of a sleep.
func TestStartGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := newStartGate(2)
		// One sandbox and one container hold both slots.
		if err := g.acquire(ctx, false); err != nil {
			t.Fatal(err)
		}
		if err := g.acquire(ctx, true); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		wait := func(name string, high bool) {
			wg.Go(func() {
				if err := g.acquire(ctx, high); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			})
			// Queued before the next one: waiters of one priority are
			// served in the order they came.
			synctest.Wait()
		}
		served := func(want ...string) {
			t.Helper()
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(order, want) {
				t.Fatalf("served %v, want %v", order, want)
			}
		}
		queued := func(n int) {
			t.Helper()
			synctest.Wait()
			g.mu.Lock()
			defer g.mu.Unlock()
			if got := len(g.high) + len(g.low); got != n {
				t.Fatalf("%d waiting, want %d", got, n)
			}
		}
		wait("sandbox-1", false)
		wait("sandbox-2", false)
		wait("container", true)
		queued(3)
		served()

		// A cancelled waiter leaves the queue without taking a slot.
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error)
		go func() { errc <- g.acquire(cctx, false) }()
		queued(4)
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled acquire succeeded")
		}
		queued(3)

		// The container goes first.
		g.release(true)
		served("container")
		// Its slot is free again, but sandboxes may hold only one of the two
		// slots and one sandbox still holds it: nobody is served.
		g.release(true)
		served("container")
		queued(2)
		// The first sandbox finishes: the next one starts, then the last.
		g.release(false)
		served("container", "sandbox-1")
		g.release(false)
		served("container", "sandbox-1", "sandbox-2")
		wg.Wait()
		g.release(false)
		g.mu.Lock()
		free, low := g.free, g.lowHeld
		g.mu.Unlock()
		if free != 2 || low != 0 {
			t.Fatalf("free %d, sandboxes held %d after every release; want 2, 0", free, low)
		}
	})

	u := newStartGate(-1)
	for i := 0; i < 100; i++ {
		if err := u.acquire(context.Background(), false); err != nil {
			t.Fatal(err)
		}
	}
}
