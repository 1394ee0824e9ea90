package csi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
)

func TestHighestVersion(t *testing.T) {
	v12 := &Driver{Version: version.MustParseGeneric("1.2.0")}
	for _, tc := range []struct {
		versions []string
		existing *Driver
		want     string // the version, or a part of the error
	}{
		{[]string{"1.0.0", "1.5.0", "2.0.0"}, nil, "1.5.0"},
		{[]string{"0.3.0"}, nil, "None of the versions specified"},
		{nil, nil, "Plugin returned an empty list for supported versions"},
		{[]string{"1.2.0"}, v12, "Another driver with the same name is already registered with a higher supported version"},
		{[]string{"1.3.0"}, v12, "1.3.0"},
	} {
		v, err := HighestVersion("RegisterPlugin", "d", tc.versions, tc.existing)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = v.String()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%v (existing %v): %q, want %q", tc.versions, tc.existing != nil, got, tc.want)
		}
	}
}

type fakeNodeServer struct {
	csipb.UnimplementedNodeServer
	resp *csipb.NodeGetInfoResponse
	err  error
}

func (s *fakeNodeServer) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return s.resp, s.err
}

type install struct {
	driver, nodeID string
	max            int64
	topology       map[string]string
}

type fakeNodeInfo struct {
	installs   []install
	uninstalls []string
	err        error
}

func (f *fakeNodeInfo) Install(_ context.Context, driver, nodeID string, max int64, topology map[string]string) error {
	f.installs = append(f.installs, install{driver, nodeID, max, topology})
	return f.err
}

func (f *fakeNodeInfo) Uninstall(_ context.Context, driver string) error {
	f.uninstalls = append(f.uninstalls, driver)
	return nil
}

func serveNode(t *testing.T, s *fakeNodeServer) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, s)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return path
}

func TestHandler(t *testing.T) {
	ctx := context.Background()
	node := &fakeNodeServer{resp: &csipb.NodeGetInfoResponse{NodeId: "node-1", MaxVolumesPerNode: 8,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.hostpath/node": "node-1"}}}}
	endpoint := serveNode(t, node)
	ni := &fakeNodeInfo{}
	h := &Handler{Drivers: &Drivers{}, NodeInfo: ni, Log: klog.Background()}

	if err := h.ValidatePlugin("hostpath.csi", endpoint, []string{"2.0.0"}); err == nil || !strings.Contains(err.Error(), "validation failed for CSI Driver hostpath.csi") {
		t.Errorf("2.x only: %v", err)
	}
	if err := h.RegisterPlugin(ctx, "hostpath.csi", "unix://"+endpoint, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	d, ok := h.Drivers.Get("hostpath.csi")
	if !ok || d.Endpoint != "unix://"+endpoint || d.Version.String() != "1.0.0" {
		t.Errorf("driver %+v %v", d, ok)
	}
	if len(ni.installs) != 1 || ni.installs[0].nodeID != "node-1" || ni.installs[0].max != 8 || ni.installs[0].topology["topology.hostpath/node"] != "node-1" {
		t.Errorf("installs %+v", ni.installs)
	}
	// The same version again is refused; DeRegister forgets it.
	if err := h.ValidatePlugin("hostpath.csi", endpoint, []string{"1.0.0"}); err == nil {
		t.Error("re-registration with the same version accepted")
	}
	h.DeRegisterPlugin("hostpath.csi", endpoint)
	if _, ok := h.Drivers.Get("hostpath.csi"); ok || len(ni.uninstalls) != 1 {
		t.Errorf("after deregistration: uninstalls %v", ni.uninstalls)
	}
	// NodeGetInfo or the publication failing: not registered.
	node.err = errors.New("driver not ready")
	if err := h.RegisterPlugin(ctx, "hostpath.csi", endpoint, []string{"1.0.0"}); err == nil || !strings.Contains(err.Error(), "driver not ready") {
		t.Errorf("NodeGetInfo failing: %v", err)
	}
	node.err, ni.err = nil, errors.New("api down")
	if err := h.RegisterPlugin(ctx, "hostpath.csi", endpoint, []string{"1.0.0"}); err == nil {
		t.Error("a failed publication registered the driver")
	}
	if _, ok := h.Drivers.Get("hostpath.csi"); ok {
		t.Error("a driver whose registration failed is known")
	}
	if NotRegistered("x").Error() != "driver name x not found in the list of registered CSI drivers" {
		t.Error(NotRegistered("x"))
	}
}
