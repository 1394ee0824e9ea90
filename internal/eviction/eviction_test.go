package eviction

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/podspec"
)

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Settings
		want    []string // Threshold.String() "/" grace "/" min reclaim
		wantErr string
	}{
		{"upstream's defaults", Settings{Hard: MergeDefaults(nil, false)},
			[]string{"imagefs.available<15%/0s/", "imagefs.inodesFree<5%/0s/", "memory.available<100Mi/0s/", "nodefs.available<10%/0s/", "nodefs.inodesFree<5%/0s/"}, ""},
		{"soft with grace, minimum reclaim", Settings{
			Hard:            map[string]string{"memory.available": "200Mi"},
			Soft:            map[string]string{"memory.available": "500Mi"},
			SoftGracePeriod: map[string]string{"memory.available": "1m30s"},
			MinimumReclaim:  map[string]string{"memory.available": "0", "nodefs.available": "1Gi"},
		}, []string{"memory.available<200Mi/0s/0", "memory.available<500Mi/1m30s/0"}, ""},
		{"0% and 100% are no threshold", Settings{Hard: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%", "pid.available": "100"}},
			[]string{"pid.available<100/0s/"}, ""},
		{"percentages with decimals", Settings{Hard: map[string]string{"nodefs.inodesFree": "2.5%"}}, []string{"nodefs.inodesFree<2.5%/0s/"}, ""},
		{"unknown signal", Settings{Hard: map[string]string{"memory.free": "1Gi"}}, nil, `unsupported eviction signal "memory.free"`},
		{"soft without grace period", Settings{Soft: map[string]string{"nodefs.available": "20%"}}, nil, "a grace period is required"},
		{"bad grace period", Settings{Soft: map[string]string{"nodefs.available": "20%"}, SoftGracePeriod: map[string]string{"nodefs.available": "soon"}}, nil, "not a positive duration"},
		{"percentage above 100", Settings{Hard: map[string]string{"nodefs.available": "120%"}}, nil, "at most 100%"},
		{"negative quantity", Settings{Hard: map[string]string{"memory.available": "-1Mi"}}, nil, "must be positive"},
		{"zero quantity", Settings{Hard: map[string]string{"memory.available": "0"}}, nil, "must be positive"},
		{"not a quantity", Settings{Hard: map[string]string{"memory.available": "lots"}}, nil, "not a quantity"},
		{"minimum reclaim of an unknown signal", Settings{MinimumReclaim: map[string]string{"disk": "1Gi"}}, nil, "unsupported eviction signal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				mr := ""
				if th.MinReclaim != nil {
					mr = th.MinReclaim.String()
				}
				s = append(s, th.String()+"/"+th.GracePeriod.String()+"/"+mr)
			}
			if strings.Join(s, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", s, tc.want)
			}
		})
	}
}

// With enforceNodeAllocatable "pods", each hard memory.available threshold
// has an allocatableMemory.available twin, as upstream; soft ones do not.
func TestParseThresholdsPodsAllocatable(t *testing.T) {
	ths, err := ParseThresholds(Settings{
		Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "1m"},
		MinimumReclaim: map[string]string{"memory.available": "50Mi"}, PodsAllocatable: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var twins []Threshold
	for _, th := range ths {
		if th.Signal == AllocatableMemoryAvailable {
			twins = append(twins, th)
		}
	}
	if len(twins) != 1 || twins[0].Value.String() != "100Mi" || !twins[0].Hard() || twins[0].MinReclaim == nil || twins[0].MinReclaim.String() != "50Mi" {
		t.Errorf("allocatable thresholds %+v", twins)
	}
}

func TestMergeDefaults(t *testing.T) {
	if got := MergeDefaults(nil, false); len(got) != len(DefaultHard) {
		t.Errorf("unset: %v, want the defaults", got)
	}
	if got := MergeDefaults(map[string]string{"memory.available": "1Gi"}, false); len(got) != 1 || got["memory.available"] != "1Gi" {
		t.Errorf("one set, no merge: %v, want it alone (the other defaults dropped)", got)
	}
	got := MergeDefaults(map[string]string{"memory.available": "1Gi"}, true)
	if len(got) != len(DefaultHard) || got["memory.available"] != "1Gi" || got["nodefs.available"] != "10%" {
		t.Errorf("one set, merged: %v, want it with the other defaults", got)
	}
	if got := MergeDefaults(map[string]string{}, false); len(got) != 0 {
		t.Errorf("set empty: %v, want no threshold", got)
	}
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func summary(memAvail, memWS, fsAvail, fsCap, inodesFree, inodes, maxPID, procs uint64) *statsv1alpha1.Summary {
	at := metav1.NewTime(t0)
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
		Memory: &statsv1alpha1.MemoryStats{Time: at, AvailableBytes: &memAvail, WorkingSetBytes: &memWS},
		Fs:     &statsv1alpha1.FsStats{Time: at, AvailableBytes: &fsAvail, CapacityBytes: &fsCap, InodesFree: &inodesFree, Inodes: &inodes},
		Runtime: &statsv1alpha1.RuntimeStats{
			ImageFs: &statsv1alpha1.FsStats{Time: at, AvailableBytes: &fsAvail, CapacityBytes: &fsCap, InodesFree: &inodesFree, Inodes: &inodes},
		},
		Rlimit: &statsv1alpha1.RlimitStats{Time: at, MaxPID: ptr.To(int64(maxPID)), NumOfRunningProcesses: ptr.To(int64(procs))},
		SystemContainers: []statsv1alpha1.ContainerStats{{Name: statsv1alpha1.SystemContainerPods, Memory: &statsv1alpha1.MemoryStats{
			Time: at, AvailableBytes: ptr.To(memAvail / 2), WorkingSetBytes: ptr.To(memWS / 2)}}},
	}}
}

const mi = 1 << 20

func TestObserve(t *testing.T) {
	obs := Observe(summary(300*mi, 700*mi, 10<<30, 100<<30, 1000, 100000, 4194304, 600))
	for sig, want := range map[Signal][2]string{
		MemoryAvailable:            {"300Mi", "1000Mi"},
		AllocatableMemoryAvailable: {"150Mi", "500Mi"},
		NodeFsAvailable:            {"10Gi", "100Gi"},
		NodeFsInodesFree:           {"1k", "100k"},
		ImageFsAvailable:           {"10Gi", "100Gi"},
		ImageFsInodesFree:          {"1k", "100k"},
		PIDAvailable:               {"4193704", "4194304"},
	} {
		o, ok := obs[sig]
		if !ok {
			t.Errorf("%s not observed", sig)
			continue
		}
		if o.Available.String() != want[0] || o.Capacity.String() != want[1] {
			t.Errorf("%s: %s of %s, want %s of %s", sig, o.Available, o.Capacity, want[0], want[1])
		}
	}
	if _, ok := obs[ContainerFsAvailable]; ok {
		t.Error("containerfs observed although the runtime reports none")
	}
	if got := Observe(&statsv1alpha1.Summary{}); len(got) != 0 {
		t.Errorf("an empty summary observes %v", got)
	}
}

func mustParse(t *testing.T, s Settings) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestThresholdMet(t *testing.T) {
	obs := Observe(summary(300*mi, 700*mi, 10<<30, 100<<30, 1000, 100000, 1000, 950))
	for _, tc := range []struct {
		hard, minReclaim string
		signal           Signal
		withMinReclaim   bool
		want             bool
	}{
		{"400Mi", "", MemoryAvailable, false, true},
		{"300Mi", "", MemoryAvailable, false, false}, // available == threshold: not below
		{"200Mi", "", MemoryAvailable, false, false},
		{"200Mi", "150Mi", MemoryAvailable, true, true}, // not yet 150Mi above
		{"200Mi", "50Mi", MemoryAvailable, true, false},
		{"11%", "", NodeFsAvailable, false, true},
		{"9%", "", NodeFsAvailable, false, false},
		{"2%", "", NodeFsInodesFree, false, true},
		{"100", "", PIDAvailable, false, true},
		{"10", "", PIDAvailable, false, false},
	} {
		s := Settings{Hard: map[string]string{string(tc.signal): tc.hard}}
		if tc.minReclaim != "" {
			s.MinimumReclaim = map[string]string{string(tc.signal): tc.minReclaim}
		}
		th := mustParse(t, s)[0]
		if got := th.Met(obs, tc.withMinReclaim); got != tc.want {
			t.Errorf("%s (min reclaim %q, counted %v): met %v, want %v", th, tc.minReclaim, tc.withMinReclaim, got, tc.want)
		}
	}
	if (Threshold{Signal: AllocatableMemoryAvailable, Value: Value{Percentage: 0.5}}).Met(Observations{}, false) {
		t.Error("a signal not observed meets its threshold")
	}
}

// The conditions and the thresholds acted on over a sequence of
// observations: a hard memory threshold with a minimum reclaim, a soft disk
// threshold with a 30 s grace period, a 60 s transition period.
func TestStateUpdate(t *testing.T) {
	ths := mustParse(t, Settings{
		Hard:            map[string]string{"memory.available": "200Mi"},
		Soft:            map[string]string{"nodefs.available": "20%"},
		SoftGracePeriod: map[string]string{"nodefs.available": "30s"},
		MinimumReclaim:  map[string]string{"memory.available": "100Mi"},
	})
	const transition = time.Minute
	steps := []struct {
		at             time.Duration
		memAvail       uint64 // MiB
		fsAvail        uint64 // GiB of 100
		wantConditions string
		wantAct        string
	}{
		{0, 500, 50, "", ""},
		{10 * time.Second, 150, 50, "MemoryPressure", "memory.available<200Mi"},
		// Above the threshold but not by the minimum reclaim: still met.
		{20 * time.Second, 250, 50, "MemoryPressure", "memory.available<200Mi"},
		{30 * time.Second, 350, 50, "MemoryPressure", ""}, // resolved; the condition stays
		// The soft disk threshold: the condition at once, acted on after 30 s.
		{40 * time.Second, 350, 10, "DiskPressure MemoryPressure", ""},
		{60 * time.Second, 350, 10, "DiskPressure MemoryPressure", ""},
		{70 * time.Second, 350, 10, "DiskPressure MemoryPressure", "nodefs.available<20%"},
		// Memory last seen at 20 s: the condition goes after 60 s.
		{80 * time.Second, 350, 10, "DiskPressure", "nodefs.available<20%"},
		// The disk recovers and dips again: the grace period starts over.
		{90 * time.Second, 350, 50, "DiskPressure", ""},
		{100 * time.Second, 350, 10, "DiskPressure", ""},
		{130 * time.Second, 100, 10, "DiskPressure MemoryPressure", "memory.available<200Mi nodefs.available<20%"},
		{250 * time.Second, 500, 50, "", ""},
	}
	var st state
	for _, s := range steps {
		obs := Observe(summary(s.memAvail*mi, 500*mi, s.fsAvail<<30, 100<<30, 1000, 1000, 1000, 10))
		var d decision
		st, d = st.update(ths, obs, t0.Add(s.at), transition)
		var conds, act []string
		for _, c := range d.conditions {
			conds = append(conds, string(c))
		}
		for _, a := range d.act {
			act = append(act, a.String())
		}
		if strings.Join(conds, " ") != s.wantConditions || strings.Join(act, " ") != s.wantAct {
			t.Errorf("at %v (memory %dMi, disk %dGi): conditions %v act %v; want [%s] [%s]", s.at, s.memAvail, s.fsAvail, conds, act, s.wantConditions, s.wantAct)
		}
	}
}

func TestAdmit(t *testing.T) {
	bestEffort := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	}
	burstable := func() *v1.Pod {
		p := bestEffort()
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
		return p
	}
	tolerating := func() *v1.Pod {
		p := bestEffort()
		p.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
		return p
	}
	critical := func() *v1.Pod {
		p := bestEffort()
		p.Spec.Priority = ptr.To[int32](2000001000)
		return p
	}
	static := func() *v1.Pod {
		p := bestEffort()
		p.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
		return p
	}
	mem, disk, pid := v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure
	for _, tc := range []struct {
		name       string
		conditions []v1.NodeConditionType
		pod        *v1.Pod
		wantMsg    string // "" for admitted
	}{
		{"no pressure", nil, bestEffort(), ""},
		{"memory pressure, burstable", []v1.NodeConditionType{mem}, burstable(), ""},
		{"memory pressure, best effort", []v1.NodeConditionType{mem}, bestEffort(), "The node had condition: [MemoryPressure]. "},
		{"memory pressure, best effort tolerating it", []v1.NodeConditionType{mem}, tolerating(), ""},
		{"disk pressure, burstable", []v1.NodeConditionType{disk}, burstable(), "The node had condition: [DiskPressure]. "},
		{"disk and memory pressure, tolerating memory", []v1.NodeConditionType{disk, mem}, tolerating(), "The node had condition: [DiskPressure MemoryPressure]. "},
		{"pid pressure", []v1.NodeConditionType{pid}, burstable(), "The node had condition: [PIDPressure]. "},
		{"disk pressure, critical priority", []v1.NodeConditionType{disk}, critical(), ""},
		{"disk pressure, static pod", []v1.NodeConditionType{disk}, static(), ""},
	} {
		r := Admit(klog.Background(), tc.conditions, tc.pod)
		switch {
		case tc.wantMsg == "" && !r.Admit:
			t.Errorf("%s: rejected: %s", tc.name, r.Message)
		case tc.wantMsg != "" && (r.Admit || r.Reason != ReasonEvicted || r.Message != tc.wantMsg):
			t.Errorf("%s: %+v, want Evicted %q", tc.name, r, tc.wantMsg)
		}
	}
}

// fakeSummary gives s as the node summary and the full summary (pods
// added); after reclaim it gives afterReclaim.
type fakeSummary struct {
	s         *statsv1alpha1.Summary
	pods      []statsv1alpha1.PodStats
	dedicated bool
	fullReads int
}

func (f *fakeSummary) NodeSummary(context.Context) (*statsv1alpha1.Summary, error) { return f.s, nil }

func (f *fakeSummary) Summary(context.Context) (*statsv1alpha1.Summary, error) {
	f.fullReads++
	out := *f.s
	out.Pods = f.pods
	return &out, nil
}

func (f *fakeSummary) DedicatedImageFs(context.Context) (bool, error) { return f.dedicated, nil }

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no summary", Config: Config{Recorder: record.NewFakeRecorder(1)}, WantErr: "Config.Summary is required"},
		{Name: "no recorder", Config: Config{Summary: &fakeSummary{}}, WantErr: "Config.Recorder is required"},
		{Name: "the real clock, the upstream period", Config: Config{Summary: &fakeSummary{}, Recorder: record.NewFakeRecorder(1)}},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if m.cfg.MonitoringPeriod != DefaultMonitoringPeriod {
			t.Errorf("period %v", m.cfg.MonitoringPeriod)
		}
	})
}

// One synchronization: the conditions change (signalled), the event is
// recorded for the node, admission follows.
func TestManagerSynchronize(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	sum := &fakeSummary{s: summary(50*mi, 900*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10)}
	m, err := New(Config{
		Thresholds: mustParse(t, Settings{Hard: map[string]string{"memory.available": "100Mi"}}),
		Summary:    sum, Recorder: rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n1"},
		PressureTransitionPeriod: time.Minute, Clock: testingclock.NewFakeClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.synchronize(context.Background())
	if c := m.Conditions(); len(c) != 1 || c[0] != v1.NodeMemoryPressure {
		t.Fatalf("conditions %v", c)
	}
	select {
	case <-m.Changed():
	default:
		t.Error("the change was not signalled")
	}
	if ev := <-rec.Events; ev != "Warning EvictionThresholdMet Attempting to reclaim memory" {
		t.Errorf("event %q", ev)
	}
	if r := m.Admit(t.Context(), admission.Attributes{Pod: &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}}); r.Admit {
		t.Error("a BestEffort pod admitted under memory pressure")
	}
}
