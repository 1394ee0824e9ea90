package dra

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeDriverV1 prepares every claim with one device named after it.
type fakeDriverV1 struct {
	drapbv1.UnimplementedDRAPluginServer
}

func (fakeDriverV1) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	out := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		out.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{
			{PoolName: "pool", DeviceName: "dev-" + c.Name, CdiDeviceIds: []string{"example.com/gpu=" + c.Name}}}}
	}
	return out, nil
}

// fakeDriverV1beta1 is an older driver offering v1beta1 only.
type fakeDriverV1beta1 struct {
	drapbv1beta1.UnimplementedDRAPluginServer
}

func (fakeDriverV1beta1) NodeUnprepareResources(_ context.Context, req *drapbv1beta1.NodeUnprepareResourcesRequest) (*drapbv1beta1.NodeUnprepareResourcesResponse, error) {
	out := &drapbv1beta1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1beta1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		out.Claims[c.Uid] = &drapbv1beta1.NodeUnprepareResourceResponse{}
	}
	return out, nil
}

// serve runs a gRPC server with register's services on a socket in dir.
func serve(t *testing.T, dir, name string, register func(*grpc.Server)) (string, func()) {
	t.Helper()
	sock := filepath.Join(dir, name)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return sock, s.Stop
}

// connState is a plugin's connection change as the registry saw it.
type connState struct {
	driver    string
	connected bool
}

// waitConn waits for the registry to see driver's plugin (dis)connected.
func waitConn(t *testing.T, changes <-chan connState, want connState) {
	t.Helper()
	for {
		select {
		case c := <-changes:
			if c == want {
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the registry never saw %+v", want)
		}
	}
}

func TestPlugins(t *testing.T) {
	dir := t.TempDir()
	client := fake.NewClientset()
	wiped := make(chan string, 10)
	client.PrependReactor("delete-collection", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		wiped <- a.(k8stesting.DeleteCollectionAction).GetListRestrictions().Fields.String()
		return true, nil, nil
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	p, err := NewPlugins(PluginsConfig{Client: client, NodeName: "n1", Registerer: reg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan connState, 100)
	p.connChanged = func(driver string, connected bool) { changes <- connState{driver, connected} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	if got := <-wiped; got != "spec.nodeName=n1" {
		t.Errorf("wiped at start %q, want every slice of the node", got)
	}

	// Versions.
	for versions, want := range map[string]string{
		"":                    "empty list of supported gRPC services",
		"v1alpha3.Node":       `none of services supported by the plugin (["v1alpha3.Node"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`,
		"v1.DRAPlugin":        "",
		"x,v1beta1.DRAPlugin": "",
	} {
		err := p.ValidatePlugin("gpu.example.com", "/x", strings.FieldsFunc(versions, func(r rune) bool { return r == ',' }))
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("versions %q: %v, want %q", versions, err, want)
		}
	}

	// A v1 plugin prepares; the call is timed.
	sock, stop := serve(t, dir, "gpu.sock", func(s *grpc.Server) { drapbv1.RegisterDRAPluginServer(s, fakeDriverV1{}) })
	if err := p.RegisterPlugin(context.Background(), "gpu.example.com", sock, []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}); err != nil {
		t.Fatal(err)
	}
	if err := p.RegisterPlugin(context.Background(), "gpu.example.com", sock, []string{drapbv1.DRAPluginService}); err == nil ||
		!strings.Contains(err.Error(), "already registered") {
		t.Errorf("the same endpoint twice: %v", err)
	}
	pl, err := p.Get("gpu.example.com")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := pl.NodePrepareResources(context.Background(), &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{{Namespace: "ns", Uid: "u1", Name: "c1"}}})
	if err != nil || resp.Claims["u1"].GetDevices()[0].GetCdiDeviceIds()[0] != "example.com/gpu=c1" {
		t.Fatalf("prepare: %v %v", resp, err)
	}
	if n := testutilCount(t, reg, "dra_grpc_operations_duration_seconds"); n != 1 {
		t.Errorf("%d observed calls, want 1", n)
	}
	if _, err := p.Get("other.example.com"); err == nil || err.Error() != "DRA driver other.example.com is not registered" {
		t.Errorf("unknown driver: %v", err)
	}

	// An older plugin: v1beta1, converted.
	old, _ := serve(t, dir, "old.sock", func(s *grpc.Server) { drapbv1beta1.RegisterDRAPluginServer(s, fakeDriverV1beta1{}) })
	if err := p.RegisterPlugin(context.Background(), "old.example.com", old, []string{drapbv1beta1.DRAPluginService}); err != nil {
		t.Fatal(err)
	}
	opl, _ := p.Get("old.example.com")
	if r, err := opl.NodeUnprepareResources(context.Background(), &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{{Uid: "u2"}}}); err != nil || r.Claims["u2"] == nil {
		t.Errorf("unprepare through v1beta1: %v %v", r, err)
	}

	// The driver's plugin stops: once disconnected for the wiping delay
	// its slices go; a plugin connected again in time cancels it.
	waitConn(t, changes, connState{"gpu.example.com", true})
	stop()
	waitConn(t, changes, connState{"gpu.example.com", false})
	clk.Step(DefaultWipingDelay + time.Second)
	if got := <-wiped; got != "spec.driver=gpu.example.com,spec.nodeName=n1" && got != "spec.nodeName=n1,spec.driver=gpu.example.com" {
		t.Errorf("wiped %q, want the driver's slices of the node", got)
	}
	p.DeRegisterPlugin("gpu.example.com", sock)
	if got := p.Drivers(); len(got) != 1 || got[0] != "old.example.com" {
		t.Errorf("drivers after deregistration: %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testutilCount is how many observations the histogram named has.
func testutilCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
