package eviction

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

func TestNewlyMet(t *testing.T) {
	ths := mustParse(t, Settings{Hard: map[string]string{"nodefs.available": "10%", "pid.available": "100", "memory.available": "100Mi"}})
	var nodefs, pids Threshold
	for _, th := range ths {
		switch th.Signal {
		case NodeFsAvailable:
			nodefs = th
		case PIDAvailable:
			pids = th
		}
	}
	quick := func(fsAvail, procs uint64) Observations {
		s := summary(0, 0, fsAvail, 100, 0, 0, 1000, procs)
		// The quick summary has the node filesystem and the PIDs only.
		return Observe(&statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Fs: s.Node.Fs, Rlimit: s.Node.Rlimit}})
	}
	for _, tc := range []struct {
		name   string
		met    []Threshold
		obs    Observations
		want   Signal
		wantOK bool
	}{
		{"nothing met", nil, quick(50, 100), "", false},
		{"disk newly met", nil, quick(5, 100), NodeFsAvailable, true},
		{"disk met already", []Threshold{nodefs}, quick(5, 100), "", false},
		{"PIDs newly met, disk met already", []Threshold{nodefs}, quick(5, 950), PIDAvailable, true},
		{"both met already", []Threshold{nodefs, pids}, quick(5, 950), "", false},
		// memory.available is not in the quick summary: never newly met
		// from it, whatever the last observation said.
		{"no memory figures", nil, quick(50, 100), "", false},
	} {
		got, ok := NewlyMet(ths, tc.met, tc.obs)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// The quick summary, read every QuickPeriod, brings the next observation
// forward when a threshold is newly met; the period is 10 s. In a synctest
// bubble, on the real clock, which is the bubble's fake one: after
// synctest.Wait, Run waits on its tickers, so "no observation" is exact.
func TestManagerQuickSignals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sum := &countingSummary{fakeSummary: fakeSummary{s: summary(400*mi, 600*mi, 50, 100, 1000, 1000, 1000, 10)}, calls: make(chan struct{}, 10)}
		quickReads := make(chan struct{}, 10)
		var fsAvail atomic.Uint64
		fsAvail.Store(50)
		m, err := New(Config{
			Thresholds: mustParse(t, Settings{Hard: map[string]string{"nodefs.available": "10%"}}), Summary: sum,
			Recorder: record.NewFakeRecorder(10),
			QuickSummary: func() (*statsv1alpha1.Summary, error) {
				defer func() { quickReads <- struct{}{} }()
				return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{Fs: &statsv1alpha1.FsStats{AvailableBytes: ptr.To(fsAvail.Load()), CapacityBytes: ptr.To(uint64(100))}}}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		go m.Run(t.Context())
		// count drains ch and tells how many values it held.
		count := func(ch chan struct{}) int {
			n := len(ch)
			for range n {
				<-ch
			}
			return n
		}
		synctest.Wait()
		if n := count(sum.calls); n != 1 {
			t.Fatalf("%d observations at start, want 1", n)
		}
		time.Sleep(QuickPeriod)
		synctest.Wait()
		if n := count(quickReads); n != 1 {
			t.Fatalf("%d quick reads in a quick period, want 1", n)
		}
		if n := count(sum.calls); n != 0 {
			t.Fatalf("observed again (%d) with nothing met", n)
		}
		fsAvail.Store(5)
		sum.set(summary(400*mi, 600*mi, 5, 100, 1000, 1000, 1000, 10))
		time.Sleep(QuickPeriod)
		synctest.Wait()
		if n := count(quickReads); n != 1 {
			t.Fatalf("%d quick reads in a quick period, want 1", n)
		}
		if n := count(sum.calls); n != 1 {
			t.Fatalf("%d observations once the quick summary showed the threshold met, want 1", n)
		}
	})
}
