package devicemanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/internal/ctortest"
)

const res = "example.com/dev"

// fakePlugin is a device plugin serving devs, answering Allocate with a
// mount and an env per device.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts    *pluginapi.DevicePluginOptions
	mu      sync.Mutex
	devs    []*pluginapi.Device
	updates chan struct{}
	prefer  []string

	preStarts [][]string
	srv       *grpc.Server
}

func (f *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return f.opts, nil
}

func (f *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		f.mu.Lock()
		devs := slices.Clone(f.devs)
		f.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-f.updates:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (f *fakePlugin) setHealth(id, health string) {
	f.mu.Lock()
	for _, d := range f.devs {
		if d.ID == id {
			d.Health = health
		}
	}
	f.mu.Unlock()
	f.updates <- struct{}{}
}

func (f *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: f.prefer}}}, nil
}

func (f *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
		for _, id := range cr.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/dev-" + id, HostPath: "/tmp/" + id})
			resp.Envs["DEV_"+id] = "1"
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: res + "=" + id})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (f *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	f.mu.Lock()
	f.preStarts = append(f.preStarts, r.DevicesIds)
	f.mu.Unlock()
	return &pluginapi.PreStartContainerResponse{}, nil
}

// start serves f on dir/name and registers it with the manager's socket.
func (f *fakePlugin) start(t *testing.T, dir, name string) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(f.srv, f)
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(f.srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+filepath.Join(dir, Socket), connectOptions(filepath.Join(dir, Socket))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: name, ResourceName: res, Options: f.opts,
	}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
}

type harness struct {
	m       *Manager
	changed chan struct{}
	clock   *clocktesting.FakeClock
	pods    []*v1.Pod
	mu      sync.Mutex
	cancel  context.CancelFunc
	dir     string
}

func newHarness(t *testing.T, dir string) *harness {
	t.Helper()
	h := &harness{changed: make(chan struct{}, 100), clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), dir: dir}
	m, err := New(Config{Dir: dir, Clock: h.clock, OnChange: func() { h.changed <- struct{}{} },
		ActivePods: func() []*v1.Pod { h.mu.Lock(); defer h.mu.Unlock(); return slices.Clone(h.pods) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.m, h.cancel = m, cancel
	if err := m.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// waitFor waits for OnChange calls until cond holds.
func (h *harness) waitFor(t *testing.T, what string, cond func(capacity, alloc int64) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c, a := h.m.Resources()
		cq, aq := c[res], a[res]
		if cond(cq.Value(), aq.Value()) {
			return
		}
		select {
		case <-h.changed:
		case <-deadline:
			t.Fatalf("%s: capacity %v allocatable %v", what, c, a)
		}
	}
}

func devPod(uid string, n int64, initN int64) *v1.Pod {
	lim := func(n int64) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	p := &v1.Pod{}
	p.UID = types.UID(uid)
	p.Name = uid
	p.Spec.Containers = []v1.Container{{Name: "app", Resources: lim(n)}}
	if initN > 0 {
		p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: lim(initN)}}
	}
	return p
}

func devices(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

func TestDevicePluginLifecycle(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	f := &fakePlugin{opts: &pluginapi.DevicePluginOptions{PreStartRequired: true}, devs: devices("d1", "d2", "d3"), updates: make(chan struct{}, 10)}
	f.start(t, dir, "fake.sock")
	h.waitFor(t, "registered", func(c, a int64) bool { return c == 3 && a == 3 })

	ctx := context.Background()
	// An init container's devices go to the app container after it.
	p1 := devPod("p1", 2, 1)
	if err := h.m.AllocatePod(ctx, p1); err != nil {
		t.Fatal(err)
	}
	h.pods = append(h.pods, p1)
	if got := h.m.alloc.get("p1", "init", res).IDs; !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("init got %v", got)
	}
	if got := h.m.alloc.get("p1", "app", res).IDs; !slices.Equal(got, []string{"d1", "d2"}) {
		t.Fatalf("app got %v, want the init container's d1 reused", got)
	}
	// Only d3 is left.
	if err := h.m.AllocatePod(ctx, devPod("p2", 2, 0)); err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1" {
		t.Fatalf("p2: %v", err)
	}
	if _, ok := h.m.alloc["p2"]; ok {
		t.Fatal("a refused pod kept devices")
	}
	cfg, err := h.m.ContainerResources(ctx, p1, &p1.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Mounts) != 2 || cfg.Mounts[0].ContainerPath != "/dev-d1" || len(cfg.Envs) != 2 || len(cfg.CDIDevices) != 2 {
		t.Fatalf("container config %v", cfg)
	}
	if len(f.preStarts) != 1 || !slices.Equal(f.preStarts[0], []string{"d1", "d2"}) {
		t.Fatalf("PreStartContainer calls %v", f.preStarts)
	}
	if d := h.m.ContainerDevices("p1", "app"); len(d) != 1 || !slices.Equal(d[0].DeviceIds, []string{"d1", "d2"}) {
		t.Fatalf("pod resources %v", d)
	}

	// An unhealthy device leaves allocatable, not capacity.
	f.setHealth("d3", pluginapi.Unhealthy)
	h.waitFor(t, "unhealthy", func(c, a int64) bool { return c == 3 && a == 2 })
	if err := h.m.AllocatePod(ctx, devPod("p3", 1, 0)); err == nil {
		t.Fatal("allocated an unhealthy device")
	}
	// A finished pod's devices are free again.
	h.mu.Lock()
	h.pods = nil
	h.mu.Unlock()
	if err := h.m.AllocatePod(ctx, devPod("p4", 2, 0)); err != nil {
		t.Fatal(err)
	}

	// The plugin goes: all unhealthy; gone after the grace period.
	f.srv.Stop()
	h.waitFor(t, "plugin gone", func(c, a int64) bool { return c == 3 && a == 0 })
	h.clock.Step(StopGracePeriod)
	h.waitFor(t, "removed", func(c, a int64) bool { return c == 0 && a == 0 })
	if c, _ := h.m.Resources(); len(c) != 0 {
		t.Fatalf("removed resource still reported: %v", c)
	}
}

func TestRestartKeepsAssignments(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	f := &fakePlugin{opts: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, devs: devices("d1", "d2"), prefer: []string{"d2"}, updates: make(chan struct{}, 10)}
	f.start(t, dir, "fake.sock")
	h.waitFor(t, "registered", func(c, a int64) bool { return c == 2 })
	p := devPod("p1", 1, 0)
	if err := h.m.AllocatePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := h.m.alloc.get("p1", "app", res).IDs; !slices.Equal(got, []string{"d2"}) {
		t.Fatalf("got %v, want the preferred d2", got)
	}
	h.cancel()
	f.srv.Stop()

	// A new manager on the same folder: the plugin's socket is gone (it
	// must register again), the assignment and the resource are kept.
	h2 := newHarness(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "fake.sock")); !os.IsNotExist(err) {
		t.Fatalf("stale plugin socket kept: %v", err)
	}
	if c, a := h2.m.Resources(); c.Name(res, resource.DecimalSI).Value() != 0 || a.Name(res, resource.DecimalSI).Value() != 0 {
		t.Fatalf("before re-registration: %v %v", c, a)
	}
	// The running pod is admitted again before its plugin is back.
	if a := h2.m.AdmissionAllocatable(); a.Name(res, resource.DecimalSI).Value() != 1 {
		t.Fatalf("admission allocatable before re-registration: %v", a)
	}
	if got := h2.m.ContainerDevices("p1", "app"); len(got) != 1 || !slices.Equal(got[0].DeviceIds, []string{"d2"}) {
		t.Fatalf("restored %v", got)
	}
	cfg, err := h2.m.ContainerResources(context.Background(), p, &p.Spec.Containers[0])
	if err != nil || len(cfg.Mounts) != 1 || cfg.Mounts[0].HostPath != "/tmp/d2" {
		t.Fatalf("restored config %v, %v", cfg, err)
	}
	f2 := &fakePlugin{opts: &pluginapi.DevicePluginOptions{}, devs: devices("d1", "d2"), updates: make(chan struct{}, 10)}
	f2.start(t, dir, "fake2.sock")
	h2.waitFor(t, "registered again", func(c, a int64) bool { return c == 2 && a == 2 })
	h2.pods = []*v1.Pod{p}
	if err := h2.m.AllocatePod(context.Background(), devPod("p2", 1, 0)); err != nil {
		t.Fatal(err)
	}
	if got := h2.m.alloc.get("p2", "app", res).IDs; !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("p2 got %v; d2 is p1's", got)
	}
}

func TestCorruptCheckpointIgnored(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(`{"data":{"entries":[]},"checksum":"0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir)
	if len(h.m.alloc) != 0 {
		t.Fatal("corrupt checkpoint read")
	}
}

func TestRegistrationValidation(t *testing.T) {
	for _, tc := range []struct {
		req *pluginapi.RegisterRequest
		ok  bool
	}{
		{&pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "a.sock", ResourceName: "example.com/gpu"}, true},
		{&pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "a.sock", ResourceName: "example.com/gpu"}, false},
		{&pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "a.sock", ResourceName: "gpu"}, false},
		{&pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "a.sock", ResourceName: "kubernetes.io/gpu"}, false},
		{&pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "../a.sock", ResourceName: "example.com/gpu"}, false},
	} {
		if err := validate(tc.req); (err == nil) != tc.ok {
			t.Errorf("validate(%v) = %v", tc.req, err)
		}
	}
}

func TestNew(t *testing.T) {
	pods := func() []*v1.Pod { return nil }
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "valid", Config: Config{Dir: "/x", ActivePods: pods}},
		{Name: "no dir", Config: Config{ActivePods: pods}, WantErr: "Config.Dir"},
		{Name: "no pods", Config: Config{Dir: "/x"}, WantErr: "Config.ActivePods"},
	}, func(t *testing.T, m *Manager) {
		ctortest.RealClock(t, m.cfg.Clock)
		if !m.cfg.SourcesReady() {
			t.Error("SourcesReady defaults to false")
		}
	})
}
