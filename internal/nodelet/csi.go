package nodelet

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/pluginwatcher"
)

// PluginsRegistryDir is where plugins put their registration sockets, as
// upstream's <root-dir>/plugins_registry.
const PluginsRegistryDir = "plugins_registry"

// expansionPeriod is how often the PVCs of published volumes are checked
// for a node expansion to finish.
const expansionPeriod = 2 * time.Second

// startPlugins runs plugin registration (CSI drivers) and, in cluster
// mode, makes sure the node's CSINode exists once the Node does.
func (n *Nodelet) startPlugins(ctx context.Context, goRun func(func())) error {
	logger := klog.FromContext(ctx)
	h := &csi.Handler{Drivers: n.csiDrivers, Log: logger}
	var info *csi.APINodeInfo
	if n.client != nil {
		info = &csi.APINodeInfo{Client: n.client, NodeName: n.opts.NodeName}
		h.NodeInfo = info
	}
	m, err := pluginwatcher.New(pluginwatcher.Config{
		Dir:      filepath.Join(n.opts.RootDir, PluginsRegistryDir),
		Handlers: map[string]pluginwatcher.Handler{registerapi.CSIPlugin: h},
		Clock:    n.clock,
	})
	if err != nil {
		return err
	}
	goRun(func() { m.Run(ctx) })
	// Volume expansion finished on the node once the controller side grew
	// a PVC (upstream's volume manager looks every 100 ms; a PVC read each
	// 2 s is enough for an operation that takes the controller seconds).
	goRun(func() { n.csiVolumes.RunExpansion(ctx, expansionPeriod) })
	if info != nil {
		goRun(func() {
			// The Node is registered by the node status loop: until then,
			// and while the API server is away, try again.
			_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				if n.nodeStatus.Node() == nil {
					return false, nil
				}
				if err := info.Ensure(ctx); err != nil {
					logger.V(2).Info("Cannot create the node's CSINode yet", "err", err)
					return false, nil
				}
				return true, nil
			})
		})
	}
	return nil
}
