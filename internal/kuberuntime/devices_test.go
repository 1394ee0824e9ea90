package kuberuntime

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
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
