package eviction

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// pod is a pod named name with one container c requesting the given
// resources (none when empty) at priority prio.
func pod(name string, prio int32, requests v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: v1.PodSpec{Priority: ptr.To(prio), Containers: []v1.Container{{
			Name: "c", Resources: v1.ResourceRequirements{Requests: requests},
		}}},
	}
}

func podStats(name string, memWS, rootfs, logs, emptyDir, procs uint64) statsv1alpha1.PodStats {
	return statsv1alpha1.PodStats{
		PodRef: statsv1alpha1.PodReference{Name: name, Namespace: "ns", UID: name},
		Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To(memWS)},
		Containers: []statsv1alpha1.ContainerStats{{
			Name:   "c",
			Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To(memWS)},
			Rootfs: &statsv1alpha1.FsStats{UsedBytes: ptr.To(rootfs), InodesUsed: ptr.To(rootfs / 4096)},
			Logs:   &statsv1alpha1.FsStats{UsedBytes: ptr.To(logs), InodesUsed: ptr.To(uint64(1))},
		}},
		VolumeStats: []statsv1alpha1.VolumeStats{{
			Name: "data", FsStats: statsv1alpha1.FsStats{UsedBytes: ptr.To(emptyDir), InodesUsed: ptr.To(emptyDir / 4096)},
		}},
		ProcessStats: &statsv1alpha1.ProcessStats{ProcessCount: ptr.To(procs)},
	}
}

func withEmptyDir(p *v1.Pod, limit string) *v1.Pod {
	ed := &v1.EmptyDirVolumeSource{}
	if limit != "" {
		ed.SizeLimit = ptr.To(resource.MustParse(limit))
	}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: ed}})
	return p
}

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestRank(t *testing.T) {
	mem := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(q)} }
	disk := func(q string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	for _, tc := range []struct {
		name      string
		signal    Signal
		dedicated bool
		pods      []*v1.Pod
		stats     []statsv1alpha1.PodStats
		want      string
	}{{
		name:   "memory: over requests first, then low priority, then usage above requests",
		signal: MemoryAvailable,
		pods:   []*v1.Pod{pod("within", 0, mem("200Mi")), pod("high", 1000, nil), pod("low-small", 0, nil), pod("low-big", 0, nil)},
		stats: []statsv1alpha1.PodStats{
			podStats("within", 100*mi, 0, 0, 0, 1), podStats("high", 500*mi, 0, 0, 0, 1),
			podStats("low-small", 10*mi, 0, 0, 0, 1), podStats("low-big", 50*mi, 0, 0, 0, 1),
		},
		want: "low-big,low-small,high,within",
	}, {
		name:   "memory: a pod without stats goes first",
		signal: MemoryAvailable,
		pods:   []*v1.Pod{pod("measured", 0, nil), pod("unknown", 1000, nil)},
		stats:  []statsv1alpha1.PodStats{podStats("measured", 100*mi, 0, 0, 0, 1)},
		want:   "unknown,measured",
	}, {
		name:   "PIDs: priority, then processes",
		signal: PIDAvailable,
		pods:   []*v1.Pod{pod("high", 10, nil), pod("few", 0, nil), pod("many", 0, nil)},
		stats:  []statsv1alpha1.PodStats{podStats("high", 0, 0, 0, 0, 100), podStats("few", 0, 0, 0, 0, 2), podStats("many", 0, 0, 0, 0, 50)},
		want:   "many,few,high",
	}, {
		name:   "nodefs on one filesystem: writable layer, logs and emptyDir count",
		signal: NodeFsAvailable,
		pods:   []*v1.Pod{withEmptyDir(pod("volume", 0, nil), ""), pod("layer", 0, nil), pod("requested", 0, disk("1Gi"))},
		stats: []statsv1alpha1.PodStats{
			podStats("volume", 0, 0, 0, 30*mi, 1), podStats("layer", 0, 40*mi, 0, 0, 1), podStats("requested", 0, 100*mi, 0, 0, 1),
		},
		want: "layer,volume,requested",
	}, {
		name:      "nodefs with a dedicated imagefs: the writable layer does not count",
		signal:    NodeFsAvailable,
		dedicated: true,
		pods:      []*v1.Pod{withEmptyDir(pod("volume", 0, nil), ""), pod("layer", 0, nil)},
		stats:     []statsv1alpha1.PodStats{podStats("volume", 0, 0, 0, 30*mi, 1), podStats("layer", 0, 40*mi, 0, 0, 1)},
		want:      "volume,layer",
	}, {
		name:      "imagefs with a dedicated imagefs: only the writable layer",
		signal:    ImageFsAvailable,
		dedicated: true,
		pods:      []*v1.Pod{withEmptyDir(pod("volume", 0, nil), ""), pod("layer", 0, nil)},
		stats:     []statsv1alpha1.PodStats{podStats("volume", 0, 0, 0, 30*mi, 1), podStats("layer", 0, 40*mi, 0, 0, 1)},
		want:      "layer,volume",
	}, {
		name:   "inodes: by inodes used",
		signal: NodeFsInodesFree,
		pods:   []*v1.Pod{pod("few", 0, nil), withEmptyDir(pod("many", 0, nil), "")},
		stats:  []statsv1alpha1.PodStats{podStats("few", 0, 4096, 0, 0, 1), podStats("many", 0, 0, 0, 100*4096, 1)},
		want:   "many,few",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			Rank(tc.pods, tc.signal, StatsOf(&statsv1alpha1.Summary{Pods: tc.stats}), tc.dedicated)
			if got := names(tc.pods); got != tc.want {
				t.Errorf("order %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	th := Threshold{Signal: MemoryAvailable, Value: Value{Quantity: ptr.To(resource.MustParse("100Mi"))}}
	obs := Observation{Available: resource.NewQuantity(50*mi, resource.BinarySI), Capacity: resource.NewQuantity(1024*mi, resource.BinarySI)}
	p := pod("hog", 0, v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")})
	msg, ann := Message(th, obs, p, podStats("hog", 300*mi, 0, 0, 0, 1), true)
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 300Mi, request is 10Mi, has larger consumption of memory. "
	if msg != want {
		t.Errorf("message\n%q, want\n%q", msg, want)
	}
	if ann[AnnotationOffendingContainers] != "c" || ann[AnnotationOffendingContainersUsage] != "300Mi" || ann[AnnotationStarvedResource] != "memory" {
		t.Errorf("annotations %v", ann)
	}
	// Disk: the writable layer and the logs; a container within its
	// request is not named.
	dth := Threshold{Signal: NodeFsAvailable, Value: Value{Percentage: 0.1}}
	dobs := Observation{Available: resource.NewQuantity(5*mi, resource.BinarySI), Capacity: resource.NewQuantity(100*mi, resource.BinarySI)}
	msg, ann = Message(dth, dobs, pod("small", 0, v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}), podStats("small", 0, mi, mi, 0, 1), true)
	if want := "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 5Mi. "; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if ann[AnnotationOffendingContainers] != "" || ann[AnnotationStarvedResource] != "ephemeral-storage" {
		t.Errorf("annotations %v", ann)
	}
	// No stats: the node part only, no annotations.
	if msg, ann = Message(th, obs, p, statsv1alpha1.PodStats{}, false); !strings.HasSuffix(msg, "available: 50Mi. ") || len(ann) != 0 {
		t.Errorf("without stats: %q %v", msg, ann)
	}
}

func TestCheckLocalStorage(t *testing.T) {
	limited := func(name, limit string, sidecar bool) *v1.Pod {
		p := pod(name, 0, nil)
		c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}}}
		if sidecar {
			c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
			p.Spec.InitContainers = []v1.Container{c}
			p.Spec.Containers[0].Name = "app"
		} else {
			p.Spec.Containers = []v1.Container{c}
		}
		return p
	}
	withPodTotal := func(ps statsv1alpha1.PodStats, used uint64) statsv1alpha1.PodStats {
		ps.EphemeralStorage = &statsv1alpha1.FsStats{UsedBytes: ptr.To(used)}
		return ps
	}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		stats      statsv1alpha1.PodStats
		dedicated  bool
		wantSignal string
		wantMsg    string
	}{
		{"emptyDir within", withEmptyDir(pod("p", 0, nil), "10Mi"), podStats("p", 0, 0, 0, 5*mi, 1), false, "", ""},
		{"emptyDir over", withEmptyDir(pod("p", 0, nil), "10Mi"), podStats("p", 0, 0, 0, 11*mi, 1), false,
			SignalEmptyDirFsLimit, `Usage of EmptyDir volume "data" exceeds the limit "10Mi". `},
		{"emptyDir without a limit", withEmptyDir(pod("p", 0, nil), ""), podStats("p", 0, 0, 0, 11*mi, 1), false, "", ""},
		{"pod over its containers' total", limited("p", "100Mi", false), withPodTotal(podStats("p", 0, 0, 0, 0, 1), 101*mi), false,
			SignalEphemeralPodFsLimit, "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. "},
		{"container over: writable layer and logs", limited("p", "10Mi", false), withPodTotal(podStats("p", 0, 6*mi, 5*mi, 0, 1), 0), false,
			SignalEphemeralContainerFsLimit, `Container c exceeded its local ephemeral storage limit "10Mi". `},
		{"container within: the writable layer is on the imagefs", limited("p", "10Mi", false), withPodTotal(podStats("p", 0, 6*mi, 5*mi, 0, 1), 0), true, "", ""},
		{"sidecar over", limited("p", "10Mi", true), withPodTotal(podStats("p", 0, 20*mi, 0, 0, 1), 0), false,
			SignalEphemeralContainerFsLimit, `Container c exceeded its local ephemeral storage limit "10Mi". `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, over := CheckLocalStorage(tc.pod, tc.stats, tc.dedicated)
			if over != (tc.wantSignal != "") || v.Signal != tc.wantSignal || v.Message != tc.wantMsg {
				t.Errorf("got %v %+v, want %q %q", over, v, tc.wantSignal, tc.wantMsg)
			}
			if over && !HasLocalStorageLimits(tc.pod) {
				t.Error("HasLocalStorageLimits is false for a pod over its limits")
			}
		})
	}
	if HasLocalStorageLimits(withEmptyDir(pod("p", 0, nil), "")) {
		t.Error("a pod without limits has limits")
	}
}

func TestPodGracePeriod(t *testing.T) {
	p := pod("p", 0, nil)
	if g := podGracePeriod(p, 0); g != 30 {
		t.Errorf("default: %d", g)
	}
	p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(60))
	if g := podGracePeriod(p, 20); g != 20 {
		t.Errorf("capped: %d", g)
	}
	if g := podGracePeriod(p, 90); g != 60 {
		t.Errorf("own: %d", g)
	}
}

type evicted struct {
	uid    types.UID
	grace  int64
	status v1.PodStatus
}

type fakeEvictor struct{ got []evicted }

func (f *fakeEvictor) Evict(_ context.Context, p *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	st := v1.PodStatus{Phase: v1.PodRunning}
	status(&st)
	f.got = append(f.got, evicted{p.UID, grace, st})
}

func (f *fakeEvictor) Reclaimed(types.UID) bool { return true }

type fakeReclaimer struct {
	calls int
	then  func()
}

func (f *fakeReclaimer) Reclaim(context.Context) error {
	f.calls++
	if f.then != nil {
		f.then()
	}
	return nil
}

// The manager evicts one pod per period for a threshold met: the first
// ranked that is not critical, with upstream's grace periods, message,
// condition and event; node-level reclaim comes first for disk.
func TestManagerEvicts(t *testing.T) {
	critical := pod("critical", systemCriticalPriority, nil)
	for _, tc := range []struct {
		name      string
		settings  Settings
		summary   *statsv1alpha1.Summary
		pods      []*v1.Pod
		stats     []statsv1alpha1.PodStats
		reclaimOK bool // the reclaimer frees enough
		wantPod   types.UID
		wantGrace int64
		wantMsg   string
		wantEvent string
		reclaims  int
		soft      bool // observed once, then after the grace period
		dedicated bool // the images have a filesystem of their own
	}{{
		name:     "memory, hard: the biggest non-critical pod, grace 1",
		settings: Settings{Hard: map[string]string{"memory.available": "100Mi"}},
		summary:  summary(50*mi, 900*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:     []*v1.Pod{critical, pod("small", 0, nil), pod("big", 0, nil)},
		stats: []statsv1alpha1.PodStats{
			podStats("critical", 800*mi, 0, 0, 0, 1), podStats("small", 10*mi, 0, 0, 0, 1), podStats("big", 80*mi, 0, 0, 0, 1),
		},
		wantPod: "big", wantGrace: 1,
		wantMsg:   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 80Mi, request is 0, has larger consumption of memory. ",
		wantEvent: "Warning Evicted The node was low on resource: memory.",
	}, {
		name: "memory, soft: the pod's grace period, capped",
		soft: true,
		settings: Settings{Soft: map[string]string{"memory.available": "100Mi"}, SoftGracePeriod: map[string]string{"memory.available": "10s"},
			Hard: map[string]string{}},
		summary: summary(50*mi, 900*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:    []*v1.Pod{pod("p", 0, nil)},
		stats:   []statsv1alpha1.PodStats{podStats("p", 10*mi, 0, 0, 0, 1)},
		wantPod: "p", wantGrace: 30,
		wantMsg: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 10Mi, request is 0, has larger consumption of memory. ",
	}, {
		name:      "disk: the reclaim frees enough, nobody is evicted",
		settings:  Settings{Hard: map[string]string{"nodefs.available": "10%"}},
		summary:   summary(900*mi, 100*mi, 5<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:      []*v1.Pod{withEmptyDir(pod("p", 0, nil), "")},
		stats:     []statsv1alpha1.PodStats{podStats("p", 0, 0, 0, 50*mi, 1)},
		reclaimOK: true, reclaims: 1,
	}, {
		name:     "disk: the reclaim is not enough",
		settings: Settings{Hard: map[string]string{"nodefs.available": "10%"}},
		summary:  summary(900*mi, 100*mi, 5<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:     []*v1.Pod{withEmptyDir(pod("p", 0, nil), "")},
		stats:    []statsv1alpha1.PodStats{podStats("p", 0, 0, 0, 50*mi, 1)},
		wantPod:  "p", wantGrace: 1, reclaims: 1,
		// 10% as a float32 of 100Gi, as upstream prints it.
		wantMsg: "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. ",
	}, {
		name:      "nodefs with a dedicated imagefs: nothing to reclaim, evicted at once",
		settings:  Settings{Hard: map[string]string{"nodefs.available": "10%"}},
		summary:   summary(900*mi, 100*mi, 5<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:      []*v1.Pod{withEmptyDir(pod("p", 0, nil), "")},
		stats:     []statsv1alpha1.PodStats{podStats("p", 0, 0, 0, 50*mi, 1)},
		dedicated: true, reclaimOK: true, wantPod: "p", wantGrace: 1,
		wantMsg: "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. ",
	}, {
		name:     "only critical pods: nobody",
		settings: Settings{Hard: map[string]string{"memory.available": "100Mi"}},
		summary:  summary(50*mi, 900*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:     []*v1.Pod{critical},
		stats:    []statsv1alpha1.PodStats{podStats("critical", 800*mi, 0, 0, 0, 1)},
	}, {
		name:     "no pressure, an emptyDir over its limit",
		settings: Settings{Hard: map[string]string{"memory.available": "100Mi"}},
		summary:  summary(900*mi, 100*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10),
		pods:     []*v1.Pod{withEmptyDir(pod("p", 0, nil), "1Mi"), pod("q", 0, nil)},
		stats:    []statsv1alpha1.PodStats{podStats("p", 0, 0, 0, 2*mi, 1), podStats("q", 0, 0, 0, 0, 1)},
		wantPod:  "p", wantGrace: 1,
		wantMsg: `Usage of EmptyDir volume "data" exceeds the limit "1Mi". `,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			sum := &fakeSummary{s: tc.summary, pods: tc.stats, dedicated: tc.dedicated}
			rc := &fakeReclaimer{}
			if tc.reclaimOK {
				rc.then = func() { sum.s = summary(900*mi, 100*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10) }
			}
			ev := &fakeEvictor{}
			clk := testingclock.NewFakeClock(t0)
			m, err := New(Config{
				Thresholds: mustParse(t, tc.settings), Summary: sum, Recorder: rec,
				ActivePods: func() []*v1.Pod { return tc.pods }, Evictor: ev, MaxPodGracePeriod: 45,
				NodeReclaim: []Reclaimer{rc}, Clock: clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.soft {
				if got := m.synchronize(context.Background()); len(got) != 0 {
					t.Fatalf("evicted %s within the grace period", names(got))
				}
				clk.Step(10 * time.Second)
			}
			got := m.synchronize(context.Background())
			if rc.calls != tc.reclaims {
				t.Errorf("reclaimed %d times, want %d", rc.calls, tc.reclaims)
			}
			if tc.wantPod == "" {
				if len(got) != 0 || len(ev.got) != 0 {
					t.Fatalf("evicted %v", ev.got)
				}
				return
			}
			if len(got) != 1 || got[0].UID != tc.wantPod || len(ev.got) != 1 {
				t.Fatalf("evicted %v (returned %s), want %s", ev.got, names(got), tc.wantPod)
			}
			e := ev.got[0]
			if e.grace != tc.wantGrace {
				t.Errorf("grace %d, want %d", e.grace, tc.wantGrace)
			}
			if e.status.Phase != v1.PodFailed || e.status.Reason != ReasonEvicted || e.status.Message != tc.wantMsg {
				t.Errorf("status %s %s %q, want Failed Evicted %q", e.status.Phase, e.status.Reason, e.status.Message, tc.wantMsg)
			}
			// The DisruptionTarget condition, for thresholds only.
			var cond *v1.PodCondition
			for i := range e.status.Conditions {
				if e.status.Conditions[i].Type == v1.DisruptionTarget {
					cond = &e.status.Conditions[i]
				}
			}
			local := strings.HasPrefix(tc.wantMsg, "Usage of")
			if local != (cond == nil) {
				t.Errorf("DisruptionTarget %+v", cond)
			}
			if cond != nil && (cond.Status != v1.ConditionTrue || cond.Reason != v1.PodReasonTerminationByKubelet || cond.Message != tc.wantMsg) {
				t.Errorf("DisruptionTarget %+v", cond)
			}
			if tc.wantEvent != "" {
				found := false
				for len(rec.Events) > 0 {
					if strings.HasPrefix(<-rec.Events, tc.wantEvent) {
						found = true
					}
				}
				if !found {
					t.Errorf("no event %q", tc.wantEvent)
				}
			}
		})
	}
}

// Without pressure or local storage limits, the pods' stats are not read.
func TestManagerIdleReadsNodeOnly(t *testing.T) {
	sum := &fakeSummary{s: summary(900*mi, 100*mi, 50<<30, 100<<30, 1000, 1000, 1000, 10)}
	m, err := New(Config{
		Thresholds: mustParse(t, Settings{Hard: map[string]string{"memory.available": "100Mi"}}), Summary: sum,
		Recorder: record.NewFakeRecorder(10), ActivePods: func() []*v1.Pod { return []*v1.Pod{pod("p", 0, nil)} },
		Evictor: &fakeEvictor{}, Clock: testingclock.NewFakeClock(t0),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.synchronize(context.Background())
	if sum.fullReads != 0 {
		t.Errorf("%d full summaries read", sum.fullReads)
	}
}
