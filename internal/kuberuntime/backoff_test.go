package kuberuntime

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

type presentImages struct{}

func (presentImages) EnsureImage(_ context.Context, _ *v1.Pod, c *v1.Container, _ *runtimeapi.PodSandboxConfig) (string, error) {
	return "sha256:" + c.Image, nil
}

func (presentImages) EnsureVolumeImage(_ context.Context, _ *v1.Pod, src *v1.ImageVolumeSource, _ *runtimeapi.PodSandboxConfig) (string, error) {
	return "sha256:" + src.Reference, nil
}

func newTestManager(t *testing.T) (*Manager, *critest.FakeRuntimeService, *testingclock.FakeClock) {
	rt := critest.NewFakeRuntimeService()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := New(Config{
		Runtime:    rt,
		Images:     presentImages{},
		Clock:      clk,
		PodLogsDir: t.TempDir(),
		PodsDir:    t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, rt, clk
}

// crash makes the running container named name exit with code at the fake
// clock's now.
func crash(t *testing.T, rt *critest.FakeRuntimeService, clk *testingclock.FakeClock, name string, code int32) {
	t.Helper()
	rt.Lock()
	defer rt.Unlock()
	for _, c := range rt.Containers {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode = code
			c.FinishedAt = clk.Now().UnixNano()
			return
		}
	}
	t.Fatalf("no running container %s", name)
}

func syncOnce(t *testing.T, m *Manager, pod *v1.Pod) kubecontainer.SyncResult {
	t.Helper()
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.SyncPod(ctx, pod, st, PodEnv{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func runningAttempt(t *testing.T, m *Manager, pod *v1.Pod, name string) (uint32, bool) {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Latest(name)
	if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, false
	}
	return c.Attempt, true
}

func TestCrashLoopBackOff(t *testing.T) {
	m, rt, clk := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")

	syncOnce(t, m, pod)
	if a, ok := runningAttempt(t, m, pod, "c"); !ok || a != 0 {
		t.Fatalf("first sync: attempt %d running=%v", a, ok)
	}

	// The first crash is restarted at once.
	crash(t, rt, clk, "c", 1)
	syncOnce(t, m, pod)
	if a, ok := runningAttempt(t, m, pod, "c"); !ok || a != 1 {
		t.Fatalf("after the first crash: attempt %d running=%v, want 1 running", a, ok)
	}

	// Then the back-off doubles: 10 s, 20 s, 40 s ... capped at 300 s.
	for i, wantDelay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second} {
		attempt := uint32(i + 2)
		crash(t, rt, clk, "c", 1)
		res := syncOnce(t, m, pod)
		w, ok := res.Waiting["c"]
		if !ok || w.Reason != kubecontainer.ReasonCrashLoopBackOff {
			t.Fatalf("attempt %d: want CrashLoopBackOff, got %+v", attempt, res.Waiting)
		}
		if res.RequeueAfter != wantDelay {
			t.Errorf("attempt %d: requeue after %v, want %v", attempt, res.RequeueAfter, wantDelay)
		}
		clk.Step(wantDelay - time.Second)
		if res := syncOnce(t, m, pod); res.Waiting["c"].Reason != kubecontainer.ReasonCrashLoopBackOff {
			t.Fatalf("attempt %d: restarted 1 s before the %v back-off ended", attempt, wantDelay)
		}
		clk.Step(time.Second)
		syncOnce(t, m, pod)
		if a, ok := runningAttempt(t, m, pod, "c"); !ok || a != attempt {
			t.Fatalf("after %v: attempt %d running=%v, want %d running", wantDelay, a, ok, attempt)
		}
	}

	// A container that ran cleanly for 10 minutes starts over at 10 s.
	clk.Step(11 * time.Minute)
	crash(t, rt, clk, "c", 1)
	syncOnce(t, m, pod)
	if _, ok := runningAttempt(t, m, pod, "c"); !ok {
		t.Fatal("after 11 minutes of clean running the crash was not restarted at once")
	}
	crash(t, rt, clk, "c", 1)
	if res := syncOnce(t, m, pod); res.RequeueAfter != 10*time.Second {
		t.Errorf("back-off after the reset: %v, want 10s", res.RequeueAfter)
	}

	// Dead containers are pruned: at most the current and one previous.
	if n := len(rt.Containers); n > 2 {
		t.Errorf("%d containers kept in the runtime, want <= 2", n)
	}
}

func TestRestartCountFromLogs(t *testing.T) {
	dir := t.TempDir()
	if got := restartCountFromLogs(dir, "c"); got != 0 {
		t.Errorf("no logs: %d", got)
	}
	for _, f := range []string{"0.log", "3.log", "3.log.20260101-000000", "1.log"} {
		writeTestFile(t, dir+"/c/"+f)
	}
	if got := restartCountFromLogs(dir, "c"); got != 4 {
		t.Errorf("restart count from logs: %d, want 4", got)
	}
}
