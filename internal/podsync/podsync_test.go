package podsync

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/ctortest"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/kuberuntime"
	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/prober"
	"github.com/nodelet/nodelet/internal/status"
)

// fakeRuntime answers GetPodStatus with before until SyncPod ran, then with
// after (what the sync created), its containers exited once KillPod ran,
// and records the calls.
type fakeRuntime struct {
	before, after *kubecontainer.PodStatus
	result        kubecontainer.SyncResult
	synced        bool
	killed        bool
	onKill        func()
	calls         []string
	killGrace     *int64
	killExit      *int32 // the exit code of killed containers (137 when nil)
	newerThan     []time.Time
	onSync        func()
	syncedPod     *v1.Pod
	inProgress    bool
}

func (r *fakeRuntime) ResizeInProgress(*v1.Pod, *kubecontainer.PodStatus) bool { return r.inProgress }

func (r *fakeRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubecontainer.PodStatus, error) {
	r.calls = append(r.calls, "GetPodStatus")
	st := &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: ns}
	switch {
	case r.synced && r.after != nil:
		st = r.after
	case r.before != nil:
		st = r.before
	}
	if !r.killed {
		return st, nil
	}
	out := *st
	out.Containers = nil
	for _, c := range st.Containers {
		cc := *c
		if cc.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			cc.State, cc.ExitCode = runtimeapi.ContainerState_CONTAINER_EXITED, 137
			if r.killExit != nil {
				cc.ExitCode = *r.killExit
			}
		}
		out.Containers = append(out.Containers, &cc)
	}
	return &out, nil
}

// GetPodStatusNewerThan answers as GetPodStatus (the fake has no relist)
// and records the time asked for.
func (r *fakeRuntime) GetPodStatusNewerThan(ctx context.Context, uid types.UID, name, ns string, t time.Time) (*kubecontainer.PodStatus, error) {
	r.newerThan = append(r.newerThan, t)
	return r.GetPodStatus(ctx, uid, name, ns)
}

func (r *fakeRuntime) SyncPod(_ context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus, _ kuberuntime.PodEnv) (kubecontainer.SyncResult, error) {
	r.calls = append(r.calls, "SyncPod")
	r.syncedPod = pod
	r.synced = true
	if r.onSync != nil {
		r.onSync()
	}
	return r.result, nil
}

func (r *fakeRuntime) KillPod(_ context.Context, _ *v1.Pod, _ *kubecontainer.RunningPod, grace *int64) error {
	r.calls = append(r.calls, "KillPod")
	r.killGrace = grace
	r.killed = true
	if r.onKill != nil {
		r.onKill()
	}
	return nil
}

func (r *fakeRuntime) RemovePod(context.Context, *kubecontainer.RunningPod) error {
	r.calls = append(r.calls, "RemovePod")
	return nil
}

func (r *fakeRuntime) called(name string) int {
	n := 0
	for _, c := range r.calls {
		if c == name {
			n++
		}
	}
	return n
}

type fakeVolumes struct {
	err      error
	torndown []types.UID
}

func (v *fakeVolumes) Setup(context.Context, *v1.Pod) (map[string]string, error) {
	return map[string]string{}, v.err
}
func (v *fakeVolumes) Teardown(uid types.UID) error { v.torndown = append(v.torndown, uid); return nil }

type fakeProber struct {
	synced  [][]prober.Container
	podIP   string
	removed []types.UID
}

func (p *fakeProber) Unhealthy(string) (string, *int64) { return "", nil }
func (p *fakeProber) Started(string) bool               { return true }
func (p *fakeProber) Ready(string, bool) bool           { return true }
func (p *fakeProber) Sync(_ context.Context, _ *v1.Pod, podIP string, running []prober.Container) {
	p.synced = append(p.synced, running)
	p.podIP = podIP
}
func (p *fakeProber) RemovePod(uid types.UID) { p.removed = append(p.removed, uid) }

type fakeFinisher struct{ final []v1.PodStatus }

func (f *fakeFinisher) Finish(_ context.Context, _ *v1.Pod, final v1.PodStatus) error {
	f.final = append(f.final, final)
	return nil
}

type fakeMirrors struct{ ensured, deleted int }

func (m *fakeMirrors) Ensure(context.Context, *v1.Pod) error { m.ensured++; return nil }
func (m *fakeMirrors) Delete(context.Context, *v1.Pod) error { m.deleted++; return nil }

// fakeForget records the removals of cgroups, pull back-offs and cached
// objects.
type fakeForget struct{ cgroups, images, objects int }

func (f *fakeForget) RemovePod(context.Context, types.UID) error { f.cgroups++; return nil }
func (f *fakeForget) Forget(*v1.Pod)                             { f.images++ }

type fakeObjects struct{ forgot int }

func (o *fakeObjects) Forget(types.UID) { o.forgot++ }

type fixture struct {
	s        *Syncer
	clock    *testingclock.FakeClock
	runtime  *fakeRuntime
	volumes  *fakeVolumes
	prober   *fakeProber
	statuses *status.Store
	recorder *record.FakeRecorder
	finisher *fakeFinisher
	mirrors  *fakeMirrors
	forget   *fakeForget
	objects  *fakeObjects
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		clock: testingclock.NewFakeClock(t0), runtime: &fakeRuntime{}, volumes: &fakeVolumes{}, prober: &fakeProber{},
		statuses: status.NewStore(), recorder: record.NewFakeRecorder(100), finisher: &fakeFinisher{},
		mirrors: &fakeMirrors{}, forget: &fakeForget{}, objects: &fakeObjects{},
	}
	s, err := New(Config{
		Runtime: f.runtime, Volumes: f.volumes, Prober: f.prober, Statuses: f.statuses, Cgroups: f.forget,
		Images: f.forget, Recorder: f.recorder, Mirrors: f.mirrors, Finisher: f.finisher, Objects: f.objects,
		ProbeContext: context.Background(), HostIPs: []string{"192.0.2.10"}, RuntimeName: "containerd", Clock: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	return f
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

// runningStatus is what the runtime has for testPod once it runs.
func runningStatus(exitCode int32, state runtimeapi.ContainerState) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{
		UID: "u1", Name: "web", Namespace: "default", IPs: []string{"10.88.0.5"},
		Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*kubecontainer.ContainerStatus{{
			ID: "c1", Name: "c", SandboxID: "s1", State: state, ExitCode: exitCode,
			CreatedAt: t0, StartedAt: t0, FinishedAt: t0,
		}},
	}
}

func TestNew(t *testing.T) {
	full := Config{
		Runtime: &fakeRuntime{}, Volumes: &fakeVolumes{}, Prober: &fakeProber{}, Statuses: status.NewStore(),
		Cgroups: &fakeForget{}, Images: &fakeForget{}, Recorder: record.NewFakeRecorder(1), ProbeContext: context.Background(),
	}
	without := func(f func(*Config)) Config {
		c := full
		f(&c)
		return c
	}
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "complete, no API server: the real clock", Config: full},
		{Name: "no runtime", Config: without(func(c *Config) { c.Runtime = nil }), WantErr: "Runtime"},
		{Name: "no volumes", Config: without(func(c *Config) { c.Volumes = nil }), WantErr: "Volumes"},
		{Name: "no prober", Config: without(func(c *Config) { c.Prober = nil }), WantErr: "Prober"},
		{Name: "no status store", Config: without(func(c *Config) { c.Statuses = nil }), WantErr: "Statuses"},
		{Name: "no cgroups", Config: without(func(c *Config) { c.Cgroups = nil }), WantErr: "Cgroups"},
		{Name: "no images", Config: without(func(c *Config) { c.Images = nil }), WantErr: "Images"},
		{Name: "no recorder", Config: without(func(c *Config) { c.Recorder = nil }), WantErr: "Recorder"},
		{Name: "no probe context", Config: without(func(c *Config) { c.ProbeContext = nil }), WantErr: "ProbeContext"},
	}, func(t *testing.T, s *Syncer) {
		ctortest.RealClock(t, s.clock)
	})
}

func TestSyncPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(f *fixture, pod *v1.Pod)
		check   func(t *testing.T, f *fixture, pod *v1.Pod, next time.Duration, err error)
	}{
		{
			name: "a new pod: synced, re-read after the changes, probed, Running",
			prepare: func(f *fixture, _ *v1.Pod) {
				f.runtime.after = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
				f.runtime.result = kubecontainer.SyncResult{Changed: true}
			},
			check: func(t *testing.T, f *fixture, pod *v1.Pod, next time.Duration, err error) {
				if err != nil || next != 0 {
					t.Fatalf("next %v, err %v", next, err)
				}
				if got := strings.Join(f.runtime.calls, ","); got != "GetPodStatus,SyncPod,GetPodStatus" {
					t.Errorf("runtime calls %s", got)
				}
				st, _ := f.statuses.Get(pod.UID)
				if st.Phase != v1.PodRunning || st.PodIP != "10.88.0.5" || st.StartTime == nil {
					t.Errorf("status phase %s podIP %q startTime %v", st.Phase, st.PodIP, st.StartTime)
				}
				if len(f.prober.synced) != 1 || len(f.prober.synced[0]) != 1 || f.prober.synced[0][0].ID != "c1" || f.prober.podIP != "10.88.0.5" {
					t.Errorf("prober given %+v at %q", f.prober.synced, f.prober.podIP)
				}
				if f.mirrors.ensured != 0 {
					t.Errorf("a mirror pod for an API pod")
				}
			},
		},
		{
			name: "a static pod: its mirror pod is ensured",
			prepare: func(_ *fixture, pod *v1.Pod) {
				pod.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
			},
			check: func(t *testing.T, f *fixture, _ *v1.Pod, _ time.Duration, _ error) {
				if f.mirrors.ensured != 1 {
					t.Errorf("mirror ensured %d times", f.mirrors.ensured)
				}
			},
		},
		{
			name: "terminal in the API: stopped, never started again",
			prepare: func(f *fixture, pod *v1.Pod) {
				pod.Status.Phase = v1.PodSucceeded
				f.runtime.before = runningStatus(0, runtimeapi.ContainerState_CONTAINER_EXITED)
			},
			check: func(t *testing.T, f *fixture, pod *v1.Pod, next time.Duration, err error) {
				if err != nil || next != 0 {
					t.Fatalf("next %v, err %v", next, err)
				}
				if f.runtime.called("SyncPod") != 0 || f.runtime.called("KillPod") != 1 {
					t.Errorf("runtime calls %v, want a kill and no sync", f.runtime.calls)
				}
				if _, ok := f.statuses.Get(pod.UID); ok {
					t.Errorf("a status recorded over the API's final one")
				}
			},
		},
		{
			name: "past the active deadline: killed, then Failed/DeadlineExceeded",
			prepare: func(f *fixture, pod *v1.Pod) {
				pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
				f.statuses.Set(context.Background(), pod, v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-10 * time.Second)}})
				f.runtime.before = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
			},
			check: func(t *testing.T, f *fixture, pod *v1.Pod, next time.Duration, err error) {
				if err != nil || next != 0 {
					t.Fatalf("next %v, err %v", next, err)
				}
				if f.runtime.called("SyncPod") != 0 || f.runtime.called("KillPod") != 1 {
					t.Errorf("runtime calls %v, want a kill and no sync", f.runtime.calls)
				}
				st, _ := f.statuses.Get(pod.UID)
				if st.Phase != v1.PodFailed || st.Reason != ReasonDeadlineExceeded || st.Message != deadlineMessage {
					t.Errorf("status %s/%s %q", st.Phase, st.Reason, st.Message)
				}
				if len(f.prober.removed) != 1 {
					t.Errorf("probes not stopped")
				}
				if ev := f.events(); len(ev) != 1 || ev[0] != "Normal DeadlineExceeded "+deadlineMessage {
					t.Errorf("events %q", ev)
				}
				// The next sync (the kill's PLEG events) does not repeat the event.
				if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
				if ev := f.events(); len(ev) != 0 {
					t.Errorf("second sync's events %q", ev)
				}
			},
		},
		{
			name: "before the active deadline: the next sync when it passes",
			prepare: func(f *fixture, pod *v1.Pod) {
				pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
				f.statuses.Set(context.Background(), pod, v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-2 * time.Second)}})
				f.runtime.before = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
				f.runtime.result = kubecontainer.SyncResult{RequeueAfter: 10 * time.Second}
			},
			check: func(t *testing.T, f *fixture, _ *v1.Pod, next time.Duration, err error) {
				if err != nil || next != 3*time.Second {
					t.Fatalf("next %v, err %v; want 3s (the deadline before the 10s back-off)", next, err)
				}
			},
		},
		{
			name: "a back-off shorter than the deadline wins",
			prepare: func(f *fixture, pod *v1.Pod) {
				pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
				f.statuses.Set(context.Background(), pod, v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: t0}})
				f.runtime.result = kubecontainer.SyncResult{RequeueAfter: time.Second}
			},
			check: func(t *testing.T, _ *fixture, _ *v1.Pod, next time.Duration, err error) {
				if err != nil || next != time.Second {
					t.Fatalf("next %v, err %v; want 1s", next, err)
				}
			},
		},
		{
			name: "a volume cannot be set up: FailedMount, waiting with the error, retried",
			prepare: func(f *fixture, pod *v1.Pod) {
				f.volumes.err = errors.New(`configmap "cfg" not found`)
				pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
			},
			check: func(t *testing.T, f *fixture, pod *v1.Pod, _ time.Duration, err error) {
				if err == nil || !strings.Contains(err.Error(), `configmap "cfg" not found`) {
					t.Fatalf("err %v, want the volume's error (for the worker's back-off)", err)
				}
				if f.runtime.called("SyncPod") != 0 {
					t.Errorf("runtime synced without volumes")
				}
				const msg = `MountVolume.SetUp failed: configmap "cfg" not found`
				if ev := f.events(); len(ev) != 1 || ev[0] != "Warning FailedMount "+msg {
					t.Errorf("events %q", ev)
				}
				st, _ := f.statuses.Get(pod.UID)
				if st.Phase != v1.PodPending || len(st.ContainerStatuses) != 1 {
					t.Fatalf("status %+v", st)
				}
				w := st.ContainerStatuses[0].State.Waiting
				if w == nil || w.Reason != kubecontainer.ReasonPodInitializing || w.Message != msg {
					t.Errorf("waiting %+v, want PodInitializing with the mount error", w)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := testPod()
			if tc.prepare != nil {
				tc.prepare(f, pod)
			}
			next, err := f.s.SyncPod(context.Background(), pod)
			tc.check(t, f, pod, next, err)
		})
	}
}

// A PLEG event reporting what the last sync already saw (the container it
// started, running) does not wake the worker; once the pod is stopping,
// every event does.
func TestPLEGEventTheSyncSaw(t *testing.T) {
	f := newFixture(t)
	pod := testPod()
	f.runtime.after = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.runtime.result = kubecontainer.SyncResult{Changed: true}
	started := &pleg.Event{ID: "u1", Type: pleg.ContainerStarted, Data: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING.String()}
	ready := &pleg.Event{ID: "u1", Type: pleg.SandboxChanged, Data: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY.String()}
	died := &pleg.Event{ID: "u1", Type: pleg.ContainerDied, Data: "c1", State: runtimeapi.ContainerState_CONTAINER_EXITED.String()}
	if f.s.Redundant(started) {
		t.Fatal("an event before any sync is redundant")
	}
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if !f.s.Redundant(started) || !f.s.Redundant(ready) {
		t.Error("the start and the sandbox the sync saw wake the worker again")
	}
	if f.s.Redundant(died) {
		t.Error("a container's death after the sync is dropped")
	}
	if err := f.s.StopPod(context.Background(), pod, nil, ptr.To[int64](7)); err != nil {
		t.Fatal(err)
	}
	if f.s.Redundant(started) {
		t.Error("events about a stopping pod are dropped")
	}
	if f.runtime.called("KillPod") != 1 || f.runtime.killGrace == nil || *f.runtime.killGrace != 7 {
		t.Errorf("kill %v with grace %v, want 7", f.runtime.calls, f.runtime.killGrace)
	}
	if len(f.prober.removed) != 1 {
		t.Errorf("the stopped pod's probes still run")
	}
}

// A pod's next sync needs the runtime's status only as of the end of its
// last sync (the relist's lists serve when newer); its first sync, and the
// first after it was stopped, read the runtime.
func TestSyncReadsStatusNewerThanLastSync(t *testing.T) {
	f := newFixture(t)
	pod := testPod()
	f.runtime.after = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f.runtime.result = kubecontainer.SyncResult{Changed: true}
	f.runtime.onSync = func() { f.clock.Step(time.Second) }
	ctx := context.Background()
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.runtime.newerThan) != 0 {
		t.Fatalf("first sync asked for a status newer than %v", f.runtime.newerThan)
	}
	end := f.clock.Now()
	f.clock.Step(time.Minute)
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.runtime.newerThan) != 1 || !f.runtime.newerThan[0].Equal(end) {
		t.Errorf("second sync asked for a status newer than %v, want [%v] (the first sync's end)", f.runtime.newerThan, end)
	}
	if err := f.s.StopPod(ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SyncPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if len(f.runtime.newerThan) != 1 {
		t.Errorf("the sync after a stop asked for a status newer than %v, want the runtime asked", f.runtime.newerThan[1:])
	}
}

func TestCleanupPod(t *testing.T) {
	deleted := metav1.NewTime(t0)
	for _, tc := range []struct {
		name       string
		pod        func() *v1.Pod // nil: a pod only the runtime knows
		exitCode   int32
		standalone bool
		wantFinal  v1.PodPhase // "" for no final status written
		wantMirror int
		restarting bool // added again while terminating: runtime objects and mirror kept
	}{
		{"deleted, every container exited 0", func() *v1.Pod { p := testPod(); p.DeletionTimestamp = &deleted; return p }, 0, false, v1.PodSucceeded, 0, false},
		{"deleted, a container failed", func() *v1.Pod { p := testPod(); p.DeletionTimestamp = &deleted; return p }, 1, false, v1.PodFailed, 0, false},
		{"not deleted in the API: no final write", testPod, 0, false, "", 0, false},
		{"static: its mirror pod goes, no final write", func() *v1.Pod {
			p := testPod()
			p.DeletionTimestamp = &deleted
			p.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
			return p
		}, 0, false, "", 1, false},
		{"static, added again while terminating: mirror pod, containers and sandboxes kept", func() *v1.Pod {
			p := testPod()
			p.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
			return p
		}, 0, false, "", 0, true},
		{"standalone: no API to write to", func() *v1.Pod { p := testPod(); p.DeletionTimestamp = &deleted; return p }, 0, true, "", 0, false},
		{"known only to the runtime", nil, 0, false, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.standalone {
				f.s.cfg.Finisher, f.s.cfg.Mirrors, f.s.cfg.Objects = nil, nil, nil
			}
			f.runtime.before = runningStatus(tc.exitCode, runtimeapi.ContainerState_CONTAINER_EXITED)
			var pod *v1.Pod
			running := &kubecontainer.RunningPod{UID: "u1", Name: "web", Namespace: "default", GracePeriod: 30}
			if tc.pod != nil {
				pod = tc.pod()
				running = nil
				f.statuses.Set(context.Background(), pod, v1.PodStatus{Phase: v1.PodRunning})
			}
			if err := f.s.CleanupPod(context.Background(), pod, running, tc.restarting); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantFinal == "" && len(f.finisher.final) != 0:
				t.Errorf("final status written: %+v", f.finisher.final)
			case tc.wantFinal != "" && (len(f.finisher.final) != 1 || f.finisher.final[0].Phase != tc.wantFinal):
				t.Errorf("final statuses %+v, want one %s", f.finisher.final, tc.wantFinal)
			}
			if f.mirrors.deleted != tc.wantMirror {
				t.Errorf("mirror pod deleted %d times, want %d", f.mirrors.deleted, tc.wantMirror)
			}
			if wantRemoved := map[bool]int{true: 0, false: 1}[tc.restarting]; f.runtime.called("RemovePod") != wantRemoved || f.forget.cgroups != 1 || len(f.volumes.torndown) != 1 {
				t.Errorf("removed: runtime %v, cgroups %d, volumes %v", f.runtime.calls, f.forget.cgroups, f.volumes.torndown)
			}
			if wantImages := map[bool]int{true: 1, false: 0}[pod != nil]; f.forget.images != wantImages {
				t.Errorf("pull back-off forgotten %d times, want %d", f.forget.images, wantImages)
			}
			if wantObjects := map[bool]int{true: 0, false: 1}[tc.standalone]; f.objects.forgot != wantObjects {
				t.Errorf("cached objects forgotten %d times, want %d", f.objects.forgot, wantObjects)
			}
			if _, ok := f.statuses.Get("u1"); ok {
				t.Error("the status outlives the pod")
			}
		})
	}
}

func TestFinalPhase(t *testing.T) {
	exited := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	for _, tc := range []struct {
		name string
		st   v1.PodStatus
		want v1.PodPhase
	}{
		{"all exited 0", v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{exited(0), exited(0)}}, v1.PodSucceeded},
		{"one exited 1", v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{exited(0), exited(1)}}, v1.PodFailed},
		{"one never terminated", v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{exited(0), running}}, v1.PodFailed},
		{"already Failed stays", v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{exited(0)}}, v1.PodFailed},
		{"already Succeeded stays", v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{exited(1)}}, v1.PodSucceeded},
	} {
		if got := FinalPhase(tc.st); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(t0)
	for _, tc := range []struct {
		name     string
		deadline *int64
		start    *metav1.Time
		now      time.Time
		exceeded bool
		left     time.Duration
	}{
		{"no deadline", nil, &start, t0.Add(time.Hour), false, 0},
		{"not started", ptr.To[int64](5), nil, t0.Add(time.Hour), false, 0},
		{"time left", ptr.To[int64](5), &start, t0.Add(2 * time.Second), false, 3 * time.Second},
		{"exactly at the deadline", ptr.To[int64](5), &start, t0.Add(5 * time.Second), true, 0},
		{"past it", ptr.To[int64](5), &start, t0.Add(7 * time.Second), true, -2 * time.Second},
	} {
		pod := testPod()
		pod.Spec.ActiveDeadlineSeconds = tc.deadline
		exceeded, left := ActiveDeadline(pod, tc.start, tc.now)
		if exceeded != tc.exceeded || left != tc.left {
			t.Errorf("%s: %v %v, want %v %v", tc.name, exceeded, left, tc.exceeded, tc.left)
		}
	}
}

// An evicted pod: not ready at once, Failed with the eviction's status once stopped with
// the eviction's grace period, its containers and volumes removed; the
// next syncs neither start nor stop it again; cleanup forgets it.
func TestEvict(t *testing.T) {
	f := newFixture(t)
	pod := testPod()
	f.runtime.before = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	f.runtime.calls = nil
	f.s.Evict(pod.UID, 1, func(st *v1.PodStatus) {
		st.Phase, st.Reason, st.Message = v1.PodFailed, "Evicted", "low on memory"
		st.Conditions = append(st.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue})
	})
	if f.s.Evicted(pod.UID) {
		t.Fatal("evicted before its sync")
	}
	// While its containers stop: not ready, not yet Failed (upstream's
	// mergePodStatus), no DisruptionTarget yet.
	f.runtime.onKill = func() {
		st, _ := f.statuses.Get(pod.UID)
		if st.Phase != v1.PodRunning || podReadyStatus(st) != v1.ConditionFalse || slices.ContainsFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget }) {
			t.Errorf("status while stopping %s ready %s %v", st.Phase, podReadyStatus(st), st.Conditions)
		}
	}
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.runtime.calls, ","); got != "GetPodStatus,KillPod,GetPodStatus,RemovePod" {
		t.Errorf("runtime calls %s", got)
	}
	if g := f.runtime.killGrace; g == nil || *g != 1 {
		t.Errorf("grace %v", g)
	}
	st, _ := f.statuses.Get(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != "low on memory" || st.Conditions[len(st.Conditions)-1].Type != v1.DisruptionTarget {
		t.Errorf("status %s %s %q %v", st.Phase, st.Reason, st.Message, st.Conditions)
	}
	if len(f.volumes.torndown) != 1 || f.forget.cgroups != 1 || len(f.prober.removed) != 1 {
		t.Errorf("volumes torn down %v, cgroups removed %d, probes removed %v", f.volumes.torndown, f.forget.cgroups, f.prober.removed)
	}
	if !f.s.Evicted(pod.UID) {
		t.Error("not reported evicted")
	}
	f.runtime.calls = nil
	if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.runtime.calls, ","); got != "GetPodStatus" {
		t.Errorf("runtime calls after the eviction %s", got)
	}
	if err := f.s.CleanupPod(context.Background(), pod, nil, false); err != nil {
		t.Fatal(err)
	}
	if f.s.Evicted(pod.UID) {
		t.Error("the eviction outlived the pod's cleanup")
	}
}

// An evicted pod's final phase is its containers' (upstream's terminal
// pod): Succeeded when they all exited 0, with no reason, its
// DisruptionTarget kept; Failed with the eviction's reason otherwise, and
// always for a static pod.
func TestEvictPhaseFromExits(t *testing.T) {
	tests := []struct {
		name   string
		exit   int32
		static bool
		phase  v1.PodPhase
		reason string
	}{
		{name: "exited 0", exit: 0, phase: v1.PodSucceeded},
		{name: "killed", exit: 137, phase: v1.PodFailed, reason: "Preempting"},
		{name: "a static pod that exited 0", exit: 0, static: true, phase: v1.PodFailed, reason: "Preempting"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pod := testPod()
			if tc.static {
				pod.Annotations = map[string]string{podspec.ConfigSourceAnnotationKey: podspec.FileSource}
			}
			f.runtime.before = runningStatus(0, runtimeapi.ContainerState_CONTAINER_RUNNING)
			f.runtime.killExit = &tc.exit
			if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			f.s.Evict(pod.UID, 30, func(st *v1.PodStatus) {
				st.Phase, st.Reason, st.Message = v1.PodFailed, "Preempting", "Preempted in order to admit critical pod"
				podspec.SetCondition(st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet"})
			})
			if _, err := f.s.SyncPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			st, _ := f.statuses.Get(pod.UID)
			if st.Phase != tc.phase || st.Reason != tc.reason || !slices.ContainsFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget }) {
				t.Errorf("status %s %q %v, want %s %q with DisruptionTarget", st.Phase, st.Reason, st.Conditions, tc.phase, tc.reason)
			}
		})
	}
}

func podReadyStatus(st v1.PodStatus) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return ""
}
