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
	if err := g.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := g.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	// Full: two sandboxes, then a container, queue up.
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
	queued := func(n int) {
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

	for i := 1; i <= 3; i++ {
		g.release()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(order)
			mu.Unlock()
			if n == i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("release %d served nobody", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	want := []string{"container", "sandbox-1", "sandbox-2"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	// Each release handed its slot to a waiter: nothing is free.
	g.mu.Lock()
	free := g.free
	g.mu.Unlock()
	if free != 0 {
		t.Fatalf("free %d, want 0", free)
	}

	u := newStartGate(-1)
	for i := 0; i < 100; i++ {
		if err := u.acquire(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
}
