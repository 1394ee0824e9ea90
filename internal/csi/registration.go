package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
)

// nodeGetInfoTimeout bounds NodeGetInfo at registration, as upstream's
// csiTimeout.
const nodeGetInfoTimeout = 2 * time.Minute

// Driver is a registered CSI driver: where it listens and the highest CSI
// version both sides support.
type Driver struct {
	Name     string
	Endpoint string
	Version  *version.Version
}

// Drivers are the registered CSI drivers, by name.
type Drivers struct {
	mu sync.RWMutex
	m  map[string]Driver
}

// Get is the driver of that name.
func (d *Drivers) Get(name string) (Driver, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	drv, ok := d.m[name]
	return drv, ok
}

func (d *Drivers) set(drv Driver) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]Driver{}
	}
	d.m[drv.Name] = drv
}

func (d *Drivers) remove(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, name)
}

// NotRegistered is upstream's error for a driver the node does not know.
func NotRegistered(name string) error {
	return fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
}

// HighestVersion is the CSI version a driver offering versions is used
// with, as upstream's validateVersions: the highest 1.x (2.x and later are
// not supported), strictly above that of a driver of the same name already
// registered (existing, nil if none).
func HighestVersion(caller, name string, versions []string, existing *Driver) (*version.Version, error) {
	if len(versions) == 0 {
		return nil, fmt.Errorf("kubernetes.io/csi: %s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name)
	}
	v, err := version.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.io/csi: %s for CSI driver %q failed. None of the versions specified %q are supported. err=%v", caller, name, versions, err)
	}
	if existing != nil && !existing.Version.LessThan(v) {
		return nil, fmt.Errorf("kubernetes.io/csi: %s for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", caller, name, existing.Version)
	}
	return v, nil
}

// NodeInfo publishes a driver's node information to the cluster (the
// CSINode, the Node's annotation and labels).
type NodeInfo interface {
	Install(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error
	Uninstall(ctx context.Context, driver string) error
}

// Handler registers CSI drivers for internal/pluginwatcher (type CSIPlugin).
type Handler struct {
	Drivers *Drivers
	// NodeInfo is nil in standalone mode: nothing to publish.
	NodeInfo NodeInfo
	// Log is the logger of registrations.
	Log klog.Logger
}

// ValidatePlugin checks the driver's versions.
func (h *Handler) ValidatePlugin(name, endpoint string, versions []string) error {
	var existing *Driver
	if d, ok := h.Drivers.Get(name); ok {
		existing = &d
	}
	if _, err := HighestVersion("ValidatePlugin", name, versions, existing); err != nil {
		return fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %v", name, endpoint, err)
	}
	return nil
}

// RegisterPlugin records the driver, asks it for its node information
// (NodeGetInfo) and publishes that; on failure the driver is forgotten
// again.
func (h *Handler) RegisterPlugin(ctx context.Context, name, endpoint string, versions []string) error {
	var existing *Driver
	if d, ok := h.Drivers.Get(name); ok {
		existing = &d
	}
	v, err := HighestVersion("RegisterPlugin", name, versions, existing)
	if err != nil {
		return err
	}
	h.Drivers.set(Driver{Name: name, Endpoint: endpoint, Version: v})
	ictx, cancel := context.WithTimeout(ctx, nodeGetInfoTimeout)
	defer cancel()
	info, err := nodeGetInfo(ictx, endpoint)
	if err == nil && h.NodeInfo != nil {
		err = h.NodeInfo.Install(ctx, name, info.GetNodeId(), info.GetMaxVolumesPerNode(), info.GetAccessibleTopology().GetSegments())
	}
	if err != nil {
		h.Drivers.remove(name)
		return err
	}
	h.Log.Info("CSI driver registered", "driver", name, "endpoint", endpoint, "version", v, "nodeID", info.GetNodeId(),
		"maxVolumesPerNode", info.GetMaxVolumesPerNode(), "topology", info.GetAccessibleTopology().GetSegments())
	return nil
}

// DeRegisterPlugin forgets the driver and takes it out of the CSINode and
// the Node.
func (h *Handler) DeRegisterPlugin(name, endpoint string) {
	h.Drivers.remove(name)
	if h.NodeInfo == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.NodeInfo.Uninstall(ctx, name); err != nil {
		h.Log.Error(err, "Cannot remove the CSI driver from the node's information", "driver", name)
	}
}

// dial connects to a CSI endpoint (a unix socket path, or unix://path).
func dial(endpoint string) (*grpc.ClientConn, error) {
	path := endpoint
	if len(path) > 7 && path[:7] == "unix://" {
		path = path[7:]
	}
	if path == "" {
		return nil, errors.New("empty CSI endpoint")
	}
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}))
}

func nodeGetInfo(ctx context.Context, endpoint string) (*csipb.NodeGetInfoResponse, error) {
	conn, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return csipb.NewNodeClient(conn).NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
}
