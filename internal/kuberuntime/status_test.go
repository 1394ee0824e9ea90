package kuberuntime

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// calls returns the CRI calls rt received since the last call to calls.
func calls(rt *critest.FakeRuntimeService) []string {
	rt.Lock()
	defer rt.Unlock()
	out := rt.Called
	rt.Called = nil
	return out
}

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// A pod's start asks the runtime only what it cannot know: nothing before
// its sandbox exists (once a relist showed the runtime without it), and no
// status of a sandbox whose state has not changed since its last answer.
func TestPodStartAsksOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	m, rt, _ := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")

	// Before any relist, the runtime is asked.
	if _, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); count(got, "ListPodSandbox") != 1 || count(got, "ListContainers") != 1 {
		t.Errorf("before a relist: calls %v, want one sandbox list and one container list", got)
	}
	if _, err := m.GetPods(ctx); err != nil {
		t.Fatal(err)
	}
	calls(rt)

	// A pod the relist did not see: nothing asked.
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); len(got) != 0 || len(st.Sandboxes)+len(st.Containers) != 0 {
		t.Errorf("new pod after a relist: calls %v, status %+v; want no calls and an empty status", got, st)
	}
	if _, err := m.SyncPod(ctx, pod, st, PodEnv{}); err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); count(got, "RunPodSandbox") != 1 || count(got, "PodSandboxStatus") != 1 {
		t.Fatalf("sync: calls %v, want one RunPodSandbox and one PodSandboxStatus", got)
	}

	// Its status right after: the sandbox's status is the one SyncPod got.
	st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); count(got, "PodSandboxStatus") != 0 || count(got, "ListPodSandbox") != 1 || count(got, "ContainerStatus") != 1 {
		t.Errorf("status after the start: calls %v, want lists and the new container's status only", got)
	}
	if !st.SandboxReady() || len(st.IPs) == 0 || st.Latest("c") == nil {
		t.Fatalf("status after the start: %+v", st)
	}

	// The sandbox stops: its status is asked again.
	rt.Lock()
	for _, s := range rt.Sandboxes {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	rt.Unlock()
	st, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); count(got, "PodSandboxStatus") != 1 || st.SandboxReady() {
		t.Errorf("stopped sandbox: calls %v, ready %v; want its status asked again, not ready", got, st.SandboxReady())
	}
}

// A relist does not make a pod look new while its sandbox is being created
// or when the relist began before its RunPodSandbox returned (the runtime
// lists a sandbox only from then on); pods gone from the runtime are
// forgotten.
func TestRelistKeepsPodsBeingCreated(t *testing.T) {
	ctx := context.Background()
	m, _, clk := newTestManager(t)
	if _, err := m.GetPods(ctx); err != nil {
		t.Fatal(err)
	}
	done := m.creatingSandbox("a")
	// A relist begun and ended while RunPodSandbox runs: a is kept.
	clk.Step(1)
	m.relistedPods(nil, clk.Now())
	if m.knownEmpty("a") {
		t.Error("a pod whose sandbox is being created counts as empty after a relist")
	}
	// One begun before RunPodSandbox returned and ended after: kept.
	relistStart := clk.Now()
	clk.Step(1)
	done()
	m.relistedPods(nil, relistStart)
	if m.knownEmpty("a") {
		t.Error("a relist begun before the sandbox was listed made its pod count as empty")
	}
	// The next relist, begun after the return, does not find it: gone.
	clk.Step(1)
	m.relistedPods(nil, clk.Now())
	if !m.knownEmpty("a") {
		t.Error("a pod the next relist did not find is still known")
	}
	if len(m.created)+len(m.inFlight) != 0 {
		t.Errorf("entries older than the relist kept: created %v, in flight %v", m.created, m.inFlight)
	}
}

// A status newer than a time the last relist began after comes from that
// relist's lists: no list is asked, only the status of what changed state;
// one newer than the relist asks the runtime.
func TestStatusNewerThanRelist(t *testing.T) {
	ctx := context.Background()
	m, rt, clk := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	if _, err := m.GetPods(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SyncPod(ctx, pod, st, PodEnv{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err != nil {
		t.Fatal(err)
	}
	syncEnd := clk.Now()
	clk.Step(time.Second)
	if _, err := m.GetPods(ctx); err != nil {
		t.Fatal(err)
	}
	calls(rt)

	// The relist began after the sync's end: answered from it.
	st, err = m.GetPodStatusNewerThan(ctx, pod.UID, pod.Name, pod.Namespace, syncEnd)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); len(got) != 0 {
		t.Errorf("status newer than a relist's start: calls %v, want none", got)
	}
	if !st.SandboxReady() || len(st.IPs) == 0 || st.Latest("c") == nil || st.Latest("c").State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("status from the relist: %+v", st)
	}

	// The container exits; the relist's lists still say running, so a
	// status newer than the relist asks the runtime, and the next relist
	// answers with the exit, asking only the exited container's status.
	rt.Lock()
	for _, c := range rt.Containers {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	}
	rt.Unlock()
	clk.Step(time.Second)
	st, err = m.GetPodStatusNewerThan(ctx, pod.UID, pod.Name, pod.Namespace, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); count(got, "ListPodSandbox") != 1 || count(got, "ListContainers") != 1 || st.Latest("c").State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("status newer than the relist: calls %v, container %v; want the lists asked and the exit seen", got, st.Latest("c").State)
	}
	asked := clk.Now()
	clk.Step(time.Second)
	if _, err := m.GetPods(ctx); err != nil {
		t.Fatal(err)
	}
	calls(rt)
	rt.Lock()
	for _, c := range rt.Containers {
		c.State = runtimeapi.ContainerState_CONTAINER_RUNNING // not what the relist saw
	}
	rt.Unlock()
	st, err = m.GetPodStatusNewerThan(ctx, pod.UID, pod.Name, pod.Namespace, asked)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); len(got) != 0 || st.Latest("c").State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("status from the next relist: calls %v, container %v; want none and the exit", got, st.Latest("c").State)
	}

	// A pod that relist did not find: empty, nothing asked.
	other := testPod(v1.RestartPolicyAlways, nil, "c")
	other.UID = "other"
	st, err = m.GetPodStatusNewerThan(ctx, other.UID, other.Name, other.Namespace, asked)
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(rt); len(got) != 0 || len(st.Sandboxes)+len(st.Containers) != 0 {
		t.Errorf("pod absent from the relist: calls %v, status %+v; want none and empty", got, st)
	}
}

func TestContainerResources(t *testing.T) {
	if got := containerResources(nil); got != nil {
		t.Errorf("nil: %v", got)
	}
	got := containerResources(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 256, MemoryLimitInBytes: 64 << 20}})
	if got == nil || got.CPULimit.MilliValue() != 500 || got.CPURequest.MilliValue() != 250 || got.MemoryLimit.Value() != 64<<20 {
		t.Errorf("got %+v", got)
	}
	// No quota (-1), minimal shares: a limit and a request of nothing.
	got = containerResources(&runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: -1, CpuShares: 2}})
	if got == nil || got.CPULimit != nil || got.CPURequest.MilliValue() != 2 || got.MemoryLimit != nil {
		t.Errorf("got %+v", got)
	}
}
