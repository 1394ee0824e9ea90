package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "defaults", Config: Config{}},
		{Name: "max below initial", Config: Config{InitialBackoff: time.Minute, MaxBackoff: time.Second}, WantErr: "MaxBackoff"},
	}, func(t *testing.T, g *Group) {
		ctortest.RealClock(t, g.cfg.Clock)
		if g.cfg.InitialBackoff != DefaultInitialBackoff || g.cfg.MaxBackoff != DefaultMaxBackoff {
			t.Errorf("back-off %v..%v, want the defaults", g.cfg.InitialBackoff, g.cfg.MaxBackoff)
		}
	})
}

func newGroup(t *testing.T) *Group {
	t.Helper()
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A fatal loop's failure is delivered once, named by the loop, and the
// loop is not run again.
func TestFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t)
		runs := 0
		err := g.Start(t.Context(), Loop{Name: "healthz", Fatal: true, Run: func(context.Context) error {
			runs++
			return errors.New("listen tcp :10248: address already in use")
		}})
		if err != nil {
			t.Fatal(err)
		}
		if g.Err() != nil {
			t.Fatal("an error before any loop failed")
		}
		select {
		case <-g.Done():
			if err := g.Err(); err == nil || !strings.HasPrefix(err.Error(), "healthz: ") || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("fatal error %v, want it named by the loop", err)
			}
		case <-time.After(time.Hour):
			t.Fatal("no fatal error")
		}
		time.Sleep(time.Hour) // fake time: would cover any back-off
		synctest.Wait()
		if runs != 1 {
			t.Errorf("fatal loop ran %d times, want 1", runs)
		}
		g.Stop()
	})
}

// A non-fatal loop that fails runs again after 1, 2, 4 s..., never past the
// maximum, and is not reported as fatal.
func TestNonFatalRetriedWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{InitialBackoff: time.Second, MaxBackoff: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var at []time.Duration
		if err := g.Start(t.Context(), Loop{Name: "devices", Run: func(context.Context) error {
			at = append(at, time.Since(start))
			return errors.New("socket gone")
		}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		// runs at 0, then after 1, 2, 4, 4 s
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("runs at %v, want %v", at, want)
		}
		if err := g.Err(); err != nil {
			t.Errorf("non-fatal failure delivered as fatal: %v", err)
		}
		g.Stop()
	})
}

// A loop that ran longer than the maximum back-off before failing is run
// again after the initial delay, not the last one.
func TestBackoffResetsAfterALongRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{InitialBackoff: time.Second, MaxBackoff: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var at []time.Duration
		if err := g.Start(t.Context(), Loop{Name: "server", Run: func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) == 3 {
				time.Sleep(time.Minute) // a long healthy run
			}
			return errors.New("failed")
		}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + 5*time.Second)
		synctest.Wait()
		// 0, +1 s, +2 s (3 s), runs a minute (63 s), +1 s again (64 s)
		want := []time.Duration{0, time.Second, 3 * time.Second, 64 * time.Second}
		if !slices.Equal(at, want) {
			t.Errorf("runs at %v, want %v", at, want)
		}
		g.Stop()
	})
}

// A loop that returns nil finished its work: it is not run again.
func TestFinishedLoopNotRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t)
		runs := 0
		if err := g.Start(t.Context(), Loop{Name: "csinode", Run: func(context.Context) error { runs++; return nil }}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if runs != 1 {
			t.Errorf("ran %d times, want 1", runs)
		}
		g.Stop()
	})
}

// Stop stops the loops in reverse order, each returned before the previous
// one is cancelled; the caller's context being cancelled does not stop
// them; nothing starts after Stop.
func TestStopInReverseOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t)
		var mu sync.Mutex
		var events []string
		loop := func(name string) Loop {
			return Loop{Name: name, Run: func(ctx context.Context) error {
				<-ctx.Done()
				mu.Lock()
				events = append(events, "cancelled "+name)
				mu.Unlock()
				time.Sleep(time.Second) // a loop that takes time to wind down
				mu.Lock()
				events = append(events, "returned "+name)
				mu.Unlock()
				return nil
			}}
		}
		ctx, cancel := context.WithCancel(t.Context())
		if err := g.Start(ctx, loop("a"), loop("b")); err != nil {
			t.Fatal(err)
		}
		if err := g.Start(ctx, loop("c")); err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		if len(events) != 0 {
			t.Fatalf("the caller's cancel stopped loops: %v", events)
		}
		g.Stop()
		want := []string{"cancelled c", "returned c", "cancelled b", "returned b", "cancelled a", "returned a"}
		if !slices.Equal(events, want) {
			t.Errorf("stop order %v, want %v", events, want)
		}
		if err := g.Start(t.Context(), loop("late")); err == nil {
			t.Error("a loop started after Stop")
		}
		g.Stop() // again: nothing to do
	})
}

// A loop failing while it is being stopped is not run again nor reported.
func TestFailureDuringStopIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t)
		runs := 0
		if err := g.Start(t.Context(), Loop{Name: "api", Fatal: true, Run: func(ctx context.Context) error {
			runs++
			<-ctx.Done()
			return ctx.Err()
		}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		g.Stop()
		if err := g.Err(); err != nil {
			t.Errorf("stop reported as a failure: %v", err)
		}
		if runs != 1 {
			t.Errorf("ran %d times", runs)
		}
	})
}

func TestStartRefusesIncompleteLoops(t *testing.T) {
	g := newGroup(t)
	if err := g.Start(t.Context(), Loop{Name: "x"}); err == nil {
		t.Error("a loop without Run was accepted")
	}
	if err := g.Start(t.Context(), Loop{Run: func(context.Context) error { return nil }}); err == nil {
		t.Error("a loop without a name was accepted")
	}
	g.Stop()
}

func TestReady(t *testing.T) {
	var r Ready
	if r.IsReady() {
		t.Fatal("ready before Close")
	}
	c := r.C()
	r.Close()
	r.Close()
	select {
	case <-c:
	default:
		t.Fatal("channel taken before Close not closed")
	}
	if !r.IsReady() {
		t.Fatal("not ready after Close")
	}
}
