package memtrim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no ready", Config: Config{}, WantErr: "Config.Ready is required"},
		{Name: "a nil ready channel", Config: Config{Ready: []<-chan struct{}{nil}}, WantErr: "Config.Ready is required"},
		{Name: "a nil clock is the real one", Config: Config{Ready: []<-chan struct{}{make(chan struct{})}}},
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

// TestRunWaitsForReadyAndSettle: nothing happens until every Ready channel
// is closed, then the settle time; Run returns after the trim.
func TestRunWaitsForReadyAndSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sources, node := make(chan struct{}), make(chan struct{})
		tr, err := New(Config{Settle: 10 * time.Second, Ready: []<-chan struct{}{sources, node}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = tr.Run(t.Context()); close(done) }()
		start := time.Now()
		returned := func() bool {
			synctest.Wait()
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		close(node)
		time.Sleep(time.Hour)
		if returned() {
			t.Fatal("Run trimmed before every Ready channel was closed")
		}
		close(sources)
		ready := time.Now()
		time.Sleep(10*time.Second - time.Nanosecond)
		if returned() {
			t.Fatal("Run trimmed before the settle time")
		}
		<-done
		if got := time.Since(ready); got != 10*time.Second {
			t.Errorf("trimmed %v after ready (started %v ago), want the settle time, 10s", got, time.Since(start))
		}
	})
}
