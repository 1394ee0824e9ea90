package memtrim

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no ready", Config: Config{}, WantErr: "Config.Ready is required"},
		{Name: "a nil clock is the real one", Config: Config{Ready: func() bool { return true }}},
	}, func(t *testing.T, tr *Trimmer) {
		ctortest.RealClock(t, tr.cfg.Clock)
		if tr.cfg.Settle != 30*time.Second {
			t.Errorf("settle %v, want the default 30s", tr.cfg.Settle)
		}
	})
}

func TestReadOnlyMappings(t *testing.T) {
	maps := strings.Join([]string{
		"00400000-00452000 r-xp 00000000 fd:01 1234 /usr/bin/nodelet",
		"00652000-00653000 r--p 00052000 fd:01 1234 /usr/bin/nodelet",
		"00653000-00654000 rw-p 00053000 fd:01 1234 /usr/bin/nodelet",
		"00700000-00800000 r--s 00000000 fd:01 1234 /usr/bin/nodelet",
		"7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6",
		"7f0000200000-7f0000300000 rw-p 00000000 00:00 0 ",
		"7f0000300000-7f0000400000 r--p 00000000 fd:01 77 /opt/my dir/nodelet",
		"7f0000400000-7f0000500000 r-xp 00000000 fd:01 1234 /usr/bin/nodelet (deleted)",
	}, "\n")
	got, err := readOnlyMappings(strings.NewReader(maps), "/usr/bin/nodelet")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x400000, 0x452000}, {0x652000, 0x653000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("mappings %#v, want %#v (read-only private mappings of the binary only)", got, want)
	}
	got, err = readOnlyMappings(strings.NewReader(maps), "/opt/my dir/nodelet")
	if err != nil || len(got) != 1 || got[0] != (mapping{0x7f0000300000, 0x7f0000400000}) {
		t.Errorf("a path with a space: %#v, %v", got, err)
	}
	if _, err := readOnlyMappings(strings.NewReader("zz-00 r-xp 0 fd:01 1 /x"), "/x"); err == nil {
		t.Error("a bad address range was accepted")
	}
}

// TestTrimSelf trims this test binary's own pages: its resident file pages
// go down (the kernel of this machine has MADV_PAGEOUT), and the process
// keeps running the code it needs.
func TestTrimSelf(t *testing.T) {
	before := rssFileKiB()
	n, err := TrimSelf()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB()
	if n == 0 || after >= before {
		t.Errorf("%d mappings trimmed, RssFile %d -> %d KiB: want fewer", n, before, after)
	}
	t.Logf("%d mappings, RssFile %d -> %d KiB", n, before, after)
}

// TestRunWaitsForReadyAndSettle: nothing happens until Ready, then the
// settle time; Run returns after the trim.
func TestRunWaitsForReadyAndSettle(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var ready atomic.Bool
	tr, err := New(Config{Clock: clk, Settle: 10 * time.Second, Ready: ready.Load})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { tr.Run(context.Background()); close(done) }()
	waitWaiter := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("Run is not waiting on its clock")
			}
			runtime.Gosched()
		}
	}
	waitWaiter()
	ready.Store(true)
	clk.Step(time.Second) // the next poll sees Ready
	waitWaiter()          // now in the settle wait
	select {
	case <-done:
		t.Fatal("Run trimmed before the settle time")
	default:
	}
	clk.Step(10 * time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the settle time")
	}
}
