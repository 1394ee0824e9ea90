package kuberuntime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/nodelet/nodelet/internal/allocation/state"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func reqs(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for _, kv := range []struct {
		list v1.ResourceList
		name v1.ResourceName
		v    string
	}{{r.Requests, v1.ResourceCPU, cpuReq}, {r.Limits, v1.ResourceCPU, cpuLim}, {r.Requests, v1.ResourceMemory, memReq}, {r.Limits, v1.ResourceMemory, memLim}} {
		if kv.v != "" {
			kv.list[kv.name] = resource.MustParse(kv.v)
		}
	}
	return r
}

// resizePod is a running pod whose containers were actuated with was and
// are now allocated now (by container name), with resizePolicy restart
// for the resources in restart.
func resizeFixture(t *testing.T, was, now map[string]v1.ResourceRequirements, restart map[string][]v1.ResourceName) (*v1.Pod, *Actuated) {
	t.Helper()
	var names []string
	for n := range now {
		names = append(names, n)
	}
	slices.Sort(names)
	pod := testPod(v1.RestartPolicyAlways, nil, names...)
	act, err := state.Open("", state.ActuatedFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Resources = now[c.Name]
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			p := v1.NotRequired
			if slices.Contains(restart[c.Name], r) {
				p = v1.RestartContainer
			}
			c.ResizePolicy = append(c.ResizePolicy, v1.ContainerResizePolicy{ResourceName: r, RestartPolicy: p})
		}
		if w, ok := was[c.Name]; ok {
			if err := act.SetContainer(pod.UID, c.Name, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	return pod, act
}

func TestComputePodActionsResize(t *testing.T) {
	small, big := reqs("100m", "200m", "32Mi", "64Mi"), reqs("200m", "400m", "32Mi", "128Mi")
	tests := []struct {
		name     string
		was, now map[string]v1.ResourceRequirements
		restart  map[string][]v1.ResourceName
		stopped  []string
		// want: the container names to update per resource, in order;
		// killed and started: restarted for their resize.
		wantMem, wantCPU []string
		killed           []string
		updatePod        bool
	}{{
		name: "nothing changed",
		was:  map[string]v1.ResourceRequirements{"a": small},
		now:  map[string]v1.ResourceRequirements{"a": small},
	}, {
		name:    "cpu and memory limits up, in place",
		was:     map[string]v1.ResourceRequirements{"a": small},
		now:     map[string]v1.ResourceRequirements{"a": big},
		wantMem: []string{"a"}, wantCPU: []string{"a"},
	}, {
		name:    "a memory request alone is an update (recorded as actuated)",
		was:     map[string]v1.ResourceRequirements{"a": small},
		now:     map[string]v1.ResourceRequirements{"a": reqs("100m", "200m", "48Mi", "64Mi")},
		wantMem: []string{"a"},
	}, {
		name:    "decreases before increases",
		was:     map[string]v1.ResourceRequirements{"a": small, "b": big},
		now:     map[string]v1.ResourceRequirements{"a": big, "b": small},
		wantMem: []string{"b", "a"}, wantCPU: []string{"b", "a"},
	}, {
		name:      "RestartContainer for memory restarts, whatever cpu says",
		was:       map[string]v1.ResourceRequirements{"a": small},
		now:       map[string]v1.ResourceRequirements{"a": big},
		restart:   map[string][]v1.ResourceName{"a": {v1.ResourceMemory}},
		killed:    []string{"a"},
		updatePod: true,
	}, {
		name:    "RestartContainer for cpu does not restart a memory resize",
		was:     map[string]v1.ResourceRequirements{"a": small},
		now:     map[string]v1.ResourceRequirements{"a": reqs("100m", "200m", "32Mi", "128Mi")},
		restart: map[string][]v1.ResourceName{"a": {v1.ResourceCPU}},
		wantMem: []string{"a"},
	}, {
		name:      "a stopped container is sized when it starts; the pod cgroup first",
		was:       map[string]v1.ResourceRequirements{"a": small},
		now:       map[string]v1.ResourceRequirements{"a": big},
		stopped:   []string{"a"},
		updatePod: true,
	}, {
		name:    "no record: taken as nothing actuated",
		now:     map[string]v1.ResourceRequirements{"a": small},
		wantMem: []string{"a"}, wantCPU: []string{"a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, act := resizeFixture(t, tt.was, tt.now, tt.restart)
			var css []*kubecontainer.ContainerStatus
			for _, c := range pod.Spec.Containers {
				st := running
				if slices.Contains(tt.stopped, c.Name) {
					st = exited
				}
				css = append(css, cs(pod, c.Name, st, 1))
			}
			got := computePodActions(pod, podStatus([]*runtimeapi.PodSandboxStatus{readySandbox("s1", 0)}, css...), nil, act)
			names := func(us []containerUpdate) []string {
				var out []string
				for _, u := range us {
					out = append(out, u.container.Name)
				}
				return out
			}
			if g := names(got.ContainersToUpdate[v1.ResourceMemory]); !slices.Equal(g, tt.wantMem) {
				t.Errorf("memory updates %v, want %v", g, tt.wantMem)
			}
			if g := names(got.ContainersToUpdate[v1.ResourceCPU]); !slices.Equal(g, tt.wantCPU) {
				t.Errorf("cpu updates %v, want %v", g, tt.wantCPU)
			}
			var killed []string
			for _, k := range got.ContainersToKill {
				killed = append(killed, k.name)
				if !strings.HasSuffix(k.message, "resize requires restart") {
					t.Errorf("kill message %q", k.message)
				}
			}
			if !slices.Equal(killed, tt.killed) {
				t.Errorf("killed %v, want %v", killed, tt.killed)
			}
			wantStart := append(slices.Clone(tt.killed), tt.stopped...)
			var started []string
			for _, i := range got.ContainersToStart {
				started = append(started, pod.Spec.Containers[i].Name)
			}
			if !slices.Equal(started, wantStart) {
				t.Errorf("started %v, want %v", started, wantStart)
			}
			if got.UpdatePodResources != tt.updatePod {
				t.Errorf("UpdatePodResources %v, want %v", got.UpdatePodResources, tt.updatePod)
			}
			if got.KillPod {
				t.Error("KillPod")
			}
		})
	}
}

// TestComputePodActionsResizeSidecar: a running sidecar is resized in
// place like an app container, restarted when its policy says so.
func TestComputePodActionsResizeSidecar(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	for _, restart := range []bool{false, true} {
		pod := testPod(v1.RestartPolicyAlways, []string{"side"}, "app")
		pod.Spec.InitContainers[0].RestartPolicy = &always
		act, _ := state.Open("", state.ActuatedFile)
		_ = act.SetContainer(pod.UID, "side", reqs("100m", "", "", ""))
		_ = act.SetContainer(pod.UID, "app", v1.ResourceRequirements{})
		pod.Spec.InitContainers[0].Resources = reqs("300m", "", "", "")
		if restart {
			pod.Spec.InitContainers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceCPU, RestartPolicy: v1.RestartContainer}}
		}
		got := computePodActions(pod, podStatus([]*runtimeapi.PodSandboxStatus{readySandbox("s1", 0)}, cs(pod, "side", running, 0), cs(pod, "app", running, 0)), nil, act)
		if restart {
			if len(got.SidecarsToStart) != 1 || len(got.ContainersToKill) != 1 || !got.UpdatePodResources || len(got.ContainersToUpdate) != 0 {
				t.Errorf("restart: %+v", got)
			}
			continue
		}
		if u := got.ContainersToUpdate[v1.ResourceCPU]; len(u) != 1 || u[0].container.Name != "side" || len(got.SidecarsToStart) != 0 {
			t.Errorf("in place: %+v", got)
		}
	}
}

// recordingRuntime records UpdateContainerResources calls, and the pod
// cgroup's changes, in one log.
type recordingRuntime struct {
	*critest.FakeRuntimeService
	mu  sync.Mutex
	log []string
}

func (r *recordingRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.ContainerResources) error {
	if err := r.FakeRuntimeService.UpdateContainerResources(ctx, id, res); err != nil {
		return err
	}
	r.add(fmt.Sprintf("container %s shares=%d quota=%d memory=%d", r.name(id), res.Linux.CpuShares, res.Linux.CpuQuota, res.Linux.MemoryLimitInBytes))
	return nil
}

func (r *recordingRuntime) name(id string) string {
	r.Lock()
	defer r.Unlock()
	if c, ok := r.Containers[id]; ok {
		return c.Metadata.Name
	}
	return id
}

func (r *recordingRuntime) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

// fakePodCgroup is a pod cgroup: its configuration as PodConfig computes
// it, changed by ResizePod.
type fakePodCgroup struct {
	rt      *recordingRuntime
	current cgroups.ResourceConfig
	usage   int64
}

func (f *fakePodCgroup) PodConfig(pod *v1.Pod) *cgroups.ResourceConfig {
	return cgroups.ResourceConfigForPod(pod, true, 100000)
}

func (f *fakePodCgroup) PodCgroupConfig(*v1.Pod) (*cgroups.ResourceConfig, error) {
	c := f.current
	return &c, nil
}

func (f *fakePodCgroup) PodMemoryUsage(*v1.Pod) (int64, error) { return f.usage, nil }

func (f *fakePodCgroup) ResizePod(_ context.Context, pod *v1.Pod, res v1.ResourceName, limit bool) error {
	rc := f.PodConfig(pod)
	switch {
	case res == v1.ResourceMemory && limit:
		f.current.Memory = rc.Memory
		f.rt.add(fmt.Sprintf("pod memory=%d", *rc.Memory))
	case res == v1.ResourceCPU && limit:
		f.current.CPUQuota = rc.CPUQuota
		f.rt.add(fmt.Sprintf("pod quota=%d", *rc.CPUQuota))
	case res == v1.ResourceCPU:
		f.current.CPUShares = rc.CPUShares
		f.rt.add(fmt.Sprintf("pod shares=%d", *rc.CPUShares))
	}
	return nil
}

// TestSyncPodResize runs a Guaranteed pod, then resizes it up and down
// through SyncPod: the pod cgroup grows before its container and shrinks
// after it, memory before CPU; the actuated resources follow, the
// container keeps running (no restart); a memory limit below the usage is
// refused with upstream's message, nothing changed.
func TestSyncPodResize(t *testing.T) {
	rt := &recordingRuntime{FakeRuntimeService: critest.NewFakeRuntimeService()}
	pcg := &fakePodCgroup{rt: rt}
	m, err := New(Config{Runtime: rt, Images: presentImages{}, PodLogsDir: t.TempDir(), PodsDir: t.TempDir(), RootDir: t.TempDir(), PodResizer: pcg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	pod.Spec.Containers[0].Resources = reqs("200m", "200m", "64Mi", "64Mi")
	pcg.current = *pcg.PodConfig(pod)
	syncOnce(t, m, pod)
	first, ok := runningAttempt(t, m, pod, "c")
	if !ok {
		t.Fatal("not running")
	}
	resize := func(r v1.ResourceRequirements) (*v1.Pod, []string, string) {
		t.Helper()
		p := pod.DeepCopy()
		p.Spec.Containers[0].Resources = r
		rt.mu.Lock()
		rt.log = nil
		rt.mu.Unlock()
		res := syncOnce(t, m, p)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return p, rt.log, res.ResizeError
	}
	check := func(p *v1.Pod) {
		t.Helper()
		st, err := m.GetPodStatus(ctx, p.UID, p.Name, p.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if m.ResizeInProgress(p, st) {
			t.Error("resize still in progress")
		}
		if a, ok := runningAttempt(t, m, p, "c"); !ok || a != first {
			t.Errorf("container restarted (attempt %d)", a)
		}
		rt.mu.Lock()
		rt.log = nil
		rt.mu.Unlock()
		syncOnce(t, m, p)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if len(rt.log) != 0 {
			t.Errorf("a second sync resized again: %v", rt.log)
		}
	}

	up, log, rerr := resize(reqs("400m", "400m", "128Mi", "128Mi"))
	want := []string{
		"pod memory=134217728",
		"container c shares=204 quota=20000 memory=134217728",
		"pod quota=40000", "pod shares=409",
		"container c shares=409 quota=40000 memory=134217728",
	}
	if rerr != "" || !slices.Equal(log, want) {
		t.Errorf("up: %q\n%s\nwant\n%s", rerr, strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	check(up)
	pod = up

	pcg.usage = 100 << 20
	rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: containerID(t, rt, "c")},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: 90 << 20}},
	}})
	_, log, rerr = resize(reqs("100m", "100m", "64Mi", "64Mi"))
	wantErr := "cannot decrease memory limits: [attempting to set pod memory limit (67108864) below current usage (104857600), " +
		"attempting to set container \"c\" memory limit (67108864) below current usage (94371840)]"
	if rerr != wantErr || len(log) != 0 {
		t.Errorf("below usage: %q, %v", rerr, log)
	}

	pcg.usage = 10 << 20
	rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: containerID(t, rt, "c")},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: 10 << 20}},
	}})
	down, log, rerr := resize(reqs("100m", "100m", "64Mi", "64Mi"))
	want = []string{
		"container c shares=409 quota=40000 memory=67108864",
		"pod memory=67108864",
		"container c shares=102 quota=10000 memory=67108864",
		"pod shares=102", "pod quota=10000",
	}
	if rerr != "" || !slices.Equal(log, want) {
		t.Errorf("down: %q\n%s\nwant\n%s", rerr, strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	check(down)
	if r, _ := m.actuated.Container(pod.UID, "c"); !r.Limits.Memory().Equal(resource.MustParse("64Mi")) || r.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("actuated %v", r)
	}
	// The memory request, which no runtime reports, comes from the
	// actuated resources.
	st, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if mr := st.Latest("c").Resources.MemoryRequest; mr == nil || mr.Value() != 64<<20 {
		t.Errorf("memory request %v", mr)
	}
}

func containerID(t *testing.T, rt *recordingRuntime, name string) string {
	t.Helper()
	rt.Lock()
	defer rt.Unlock()
	for id, c := range rt.Containers {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return id
		}
	}
	t.Fatalf("no container %s", name)
	return ""
}
