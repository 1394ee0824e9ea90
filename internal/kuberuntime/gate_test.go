package kuberuntime

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestStartGate(t *testing.T) {
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
		defer wg.Done()
		if err := g.acquire(ctx, high); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	served := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			got := len(order)
			mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d served, want %d (%v)", got, n, order)
			}
			time.Sleep(time.Millisecond)
		}
	}
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			g.mu.Lock()
			got := len(g.high) + len(g.low)
			g.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Add(3)
	go wait("sandbox-1", false)
	queued(1)
	go wait("sandbox-2", false)
	queued(2)
	go wait("container", true)
	queued(3)

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
	served(1)
	// Its slot is free again, but sandboxes may hold only one of the two
	// slots and one sandbox still holds it: nobody is served.
	g.release(true)
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(order) != 1 {
		t.Fatalf("a second sandbox took the last slot: %v", order)
	}
	mu.Unlock()
	// The first sandbox finishes: the next one starts, then the last.
	g.release(false)
	served(2)
	g.release(false)
	served(3)
	wg.Wait()
	want := []string{"container", "sandbox-1", "sandbox-2"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	g.release(false)
	g.mu.Lock()
	free, low := g.free, g.lowHeld
	g.mu.Unlock()
	if free != 2 || low != 0 {
		t.Fatalf("free %d, sandboxes held %d after every release; want 2, 0", free, low)
	}

	u := newStartGate(-1)
	for i := 0; i < 100; i++ {
		if err := u.acquire(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
}
