// Command hostpathcsi is the project's own CSI driver for tests (the
// upstream csi-driver-host-path and node-driver-registrar are not served
// by the module proxy here). It serves the CSI identity and node services
// on -endpoint and registers itself with the kubelet as the
// node-driver-registrar sidecar would: it serves pluginregistration v1 on
// <-registry-dir>/<name>-reg.sock (GetInfo, NotifyRegistrationStatus).
//
// Volumes live under -state-dir (state.json records them, so a restarted
// driver knows its volumes): a directory each (parameter type=dir, the
// default), or an ext4 image on a loop device (type=image: real capacity,
// online expansion seen in the container, block volumes). The controller
// service creates, deletes, "attaches" (ControllerPublishVolume, for the
// external-attacher), validates and expands volumes; the node service
// stages (with -stage, the default) and publishes by mount, reports
// statistics (statfs) and grows file systems (resize2fs). Inline ephemeral
// volumes (csi.storage.k8s.io/ephemeral) are made at NodePublishVolume
// (attributes type and size) and removed at NodeUnpublishVolume. With
// -volume-mount-group the driver applies the pod's fsGroup itself. csi-sanity
// proves all of it (sanity_test.go).
//
// With -fail-node-get-info N the first N NodeGetInfo calls fail, to show
// the kubelet retrying a registration; a volume with the attribute
// hang=true never gets an answer to NodePublishVolume (a hung driver). Every call is logged on stdout with
// its request (paths and volume context included).
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TopologyKey is the topology segment the driver reports: the node's name.
const TopologyKey = "topology.hostpath.csi.nodelet.dev/node"

type driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	csipb.UnimplementedNodeServer
	registerapi.UnimplementedRegistrationServer
	name, nodeID, endpoint string
	maxVolumes             int64
	failInfo               atomic.Int64
	store                  *store
	// stage: STAGE_UNSTAGE_VOLUME; mountGroup: VOLUME_MOUNT_GROUP.
	stage, mountGroup bool
}

func main() {
	name := flag.String("name", "hostpath.csi.nodelet.dev", "driver name")
	endpoint := flag.String("endpoint", "", "the CSI socket's path")
	registry := flag.String("registry-dir", "", "the kubelet's plugins_registry folder (empty: do not register)")
	nodeID := flag.String("node-id", "", "the node's ID for NodeGetInfo (its name)")
	maxVolumes := flag.Int64("max-volumes", 0, "max_volumes_per_node")
	failInfo := flag.Int64("fail-node-get-info", 0, "fail the first N NodeGetInfo calls")
	stateDir := flag.String("state-dir", "", "where the volumes and the driver's state live")
	stage := flag.Bool("stage", true, "offer STAGE_UNSTAGE_VOLUME (volumes staged, then published)")
	mountGroup := flag.Bool("volume-mount-group", false, "offer VOLUME_MOUNT_GROUP (the driver applies the pod's fsGroup)")
	flag.Parse()
	if *endpoint == "" || *nodeID == "" || *stateDir == "" {
		log.Fatal("-endpoint, -node-id and -state-dir are required")
	}
	st, err := openStore(*stateDir)
	if err != nil {
		log.Fatal(err)
	}
	d := &driver{name: *name, nodeID: *nodeID, endpoint: *endpoint, maxVolumes: *maxVolumes, store: st,
		stage: *stage, mountGroup: *mountGroup}
	d.failInfo.Store(*failInfo)

	var socks []string
	serve := func(path string, register func(*grpc.Server)) {
		_ = os.Remove(path)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			log.Fatal(err)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
		register(srv)
		socks = append(socks, path)
		go func() { _ = srv.Serve(l) }()
	}
	serve(*endpoint, func(s *grpc.Server) {
		csipb.RegisterIdentityServer(s, d)
		csipb.RegisterControllerServer(s, d)
		csipb.RegisterNodeServer(s, d)
	})
	if *registry != "" {
		serve(filepath.Join(*registry, *name+"-reg.sock"), func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, d) })
	}
	log.Printf("hostpathcsi %s serving on %s", *name, *endpoint)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	// The sockets go with the driver, so the kubelet deregisters it.
	for _, s := range socks {
		_ = os.Remove(s)
	}
	log.Print("stopped")
}

func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	log.Printf("call %s request %+v -> error %v", info.FullMethod, req, err)
	return resp, err
}

// GetInfo implements the Registration service, as node-driver-registrar.
func (d *driver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: d.name, Endpoint: d.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

// NotifyRegistrationStatus logs what the kubelet says.
func (d *driver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	log.Printf("registration status: registered=%v error=%q", s.PluginRegistered, s.Error)
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.1.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: []*csipb.PluginCapability{{Type: &csipb.PluginCapability_Service_{
		Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}},
		{Type: &csipb.PluginCapability_Service_{
			Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csipb.PluginCapability_VolumeExpansion_{
			VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: csipb.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (d *driver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	if d.failInfo.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "the driver is not ready yet (-fail-node-get-info)")
	}
	return &csipb.NodeGetInfoResponse{NodeId: d.nodeID, MaxVolumesPerNode: d.maxVolumes,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{TopologyKey: d.nodeID}}}, nil
}
