package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"
)

type fakeDevicePlugins struct{ cfg *runtimeapi.ContainerConfig }

func (f fakeDevicePlugins) ContainerResources(context.Context, *v1.Pod, *v1.Container) (*runtimeapi.ContainerConfig, error) {
	return f.cfg, nil
}

func TestContainerConfigDevicePlugins(t *testing.T) {
	m, _, _ := newTestManager(t)
	m.cfg.DevicePlugins = fakeDevicePlugins{&runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "DEV", Value: []byte("plugin")}, {Key: "ONLY_PLUGIN", Value: []byte("1")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/dev-file", HostPath: "/tmp/dev-file"}},
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/fake0", HostPath: "/tmp/fake0", Permissions: "rw"}},
		Annotations: map[string]string{"vendor/dev": "d1"},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/dev=d1"}},
	}}
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "DEV", Value: "mine"}}
	cfg, err := m.containerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img", podFacts{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The container's own env comes after the plugin's, so it wins.
	last := map[string]string{}
	for _, e := range cfg.Envs {
		last[e.Key] = string(e.Value)
	}
	if last["DEV"] != "mine" || last["ONLY_PLUGIN"] != "1" {
		t.Fatalf("envs %v", last)
	}
	if !mountedAt(cfg.Mounts, "/dev-file") || len(cfg.Devices) != 1 || cfg.Devices[0].Permissions != "rw" {
		t.Fatalf("mounts %v devices %v", cfg.Mounts, cfg.Devices)
	}
	if cfg.Annotations["vendor/dev"] != "d1" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/dev=d1" {
		t.Fatalf("annotations %v cdi %v", cfg.Annotations, cfg.CDIDevices)
	}
}

type fakeCPUs map[string]cpuset.CPUSet

type fakeMems map[string]string

func (f fakeMems) ContainerMems(_ context.Context, _ *v1.Pod, name string) string { return f[name] }

func (f fakeCPUs) ContainerCPUs(_, name string) cpuset.CPUSet { return f[name] }

// TestContainerConfigCPUs: the CPU manager's cpuset and the memory
// manager's NUMA nodes go into the container's CRI resources; none leaves
// the runtime's default.
func TestContainerConfigCPUs(t *testing.T) {
	m, _, _ := newTestManager(t)
	m.cfg.CPUs = fakeCPUs{"pinned": cpuset.New(2, 3)}
	m.cfg.Mems = fakeMems{"pinned": "0-1"}
	pod := testPod(v1.RestartPolicyAlways, nil, "pinned", "free")
	for i, want := range []string{"2-3", ""} {
		cfg, err := m.containerConfig(context.Background(), pod, &pod.Spec.Containers[i], 0, "img", podFacts{}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Linux.Resources.GetCpusetCpus(); got != want {
			t.Errorf("%s: cpuset %q, want %q", pod.Spec.Containers[i].Name, got, want)
		}
		if got, wantMems := cfg.Linux.Resources.GetCpusetMems(), map[string]string{"2-3": "0-1"}[want]; got != wantMems {
			t.Errorf("%s: cpuset.mems %q, want %q", pod.Spec.Containers[i].Name, got, wantMems)
		}
	}
}

// fakeDRA fails PrepareResources while err is set and gives every
// container the CDI IDs ids.
type fakeDRA struct {
	err      error
	prepared int
	ids      []string
}

func (f *fakeDRA) PrepareResources(context.Context, *v1.Pod) error {
	if f.err != nil {
		return f.err
	}
	f.prepared++
	return nil
}

func (f *fakeDRA) ContainerCDIDevices(*v1.Pod, *v1.Container) ([]string, error) { return f.ids, nil }

// TestSyncPodPreparesDynamicResources: as upstream, the pod's claims are
// prepared before its sandbox: a failure is an event
// (FailedPrepareDynamicResources) and a failed sync with no sandbox; once
// prepared, the containers get the claims' CDI devices after the device
// plugins'.
func TestSyncPodPreparesDynamicResources(t *testing.T) {
	m, rt, _ := newTestManager(t)
	rec := record.NewFakeRecorder(10)
	dra := &fakeDRA{err: errors.New(`DRA driver gpu.example.com is not registered`), ids: []string{"gpu.example.com/gpu=claim-1"}}
	m.cfg.Recorder, m.cfg.DRA = rec, dra
	m.cfg.DevicePlugins = fakeDevicePlugins{&runtimeapi.ContainerConfig{CDIDevices: []*runtimeapi.CDIDevice{{Name: "example.com/dev=d1"}}}}
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.SyncPod(ctx, pod, st, PodEnv{})
	if err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("sync error %v, want the prepare's", err)
	}
	if w := res.Waiting["app"]; w.Reason != "ContainerCreating" {
		t.Errorf("waiting %+v, want ContainerCreating", res.Waiting)
	}
	if len(rt.Sandboxes) != 0 {
		t.Errorf("a sandbox was created before the claims were prepared")
	}
	if got := <-rec.Events; got != "Warning FailedPrepareDynamicResources Failed to prepare dynamic resources: DRA driver gpu.example.com is not registered" {
		t.Errorf("event %q", got)
	}

	dra.err = nil
	syncOnce(t, m, pod)
	if dra.prepared != 1 || len(rt.Sandboxes) != 1 {
		t.Fatalf("prepared %d times, %d sandboxes; want 1 and 1", dra.prepared, len(rt.Sandboxes))
	}
	cfg, err := m.containerConfig(ctx, pod, &pod.Spec.Containers[0], 0, "img", podFacts{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range cfg.CDIDevices {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "example.com/dev=d1,gpu.example.com/gpu=claim-1" {
		t.Errorf("CDI devices %v, want the plugin's then the claim's", names)
	}
}
