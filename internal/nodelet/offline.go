package nodelet

import (
	"context"
	"errors"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/checkpoint"
	"github.com/nodelet/nodelet/internal/csi"
	"github.com/nodelet/nodelet/internal/metrics"
)

// offlineDir is the checkpoint's directory under the root dir.
const offlineDir = "offline"

// newOffline creates the offline checkpoint (offline autonomy): its
// read-through getter replaces the API getter for volumes, environments,
// image pull secrets and CSI objects.
func (n *Nodelet) newOffline() error {
	m, err := checkpoint.NewManager(checkpoint.ManagerConfig{
		Dir:     filepath.Join(n.opts.RootDir, offlineDir),
		Secrets: n.opts.Offline.Secrets,
		Pods:    func() []*v1.Pod { return n.pods.Source(sourceAPI) },
		Status:  n.statuses.GetVersioned,
		Node: func() *v1.Node {
			if n.nodeStatus == nil {
				return nil
			}
			return n.nodeStatus.Node()
		},
		Down:  n.contact.Down,
		Clock: n.clock,
	})
	if err != nil {
		return err
	}
	n.offline = m
	n.objects = m.Getter(n.apiGetter, n.client, func(ns string, links bool) (map[string]string, error) {
		if n.serviceSource == nil {
			return nil, errors.New("no Service source")
		}
		return n.serviceSource.Env(ns, links)
	})
	checkpoint.RegisterMetrics(metrics.Kubelet, m)
	return nil
}

// csiObjects is what CSI volumes read their claims, volumes and CSIDrivers
// with: the checkpoint's getter when offline autonomy is on.
func (n *Nodelet) csiObjects() csi.Objects {
	if g, ok := n.objects.(*checkpoint.Getter); ok {
		return g
	}
	return nil
}

// restore runs the API pods of the checkpoint until the API server's own
// set replaces them (they are the API source's pods meanwhile, but the
// source does not count as seen: nothing is removed for lack of the API
// server), then keeps the checkpoint up to date.
func (n *Nodelet) restore(ctx context.Context, goRun func(func())) {
	if n.offline == nil {
		return
	}
	if pods := n.offline.Restore(ctx); len(pods) > 0 {
		n.apply(ctx, n.pods.Set(sourceAPI, pods))
	}
	goRun(func() { n.offline.Run(ctx) })
}

// apiSynced tells the checkpoint the API server's full set arrived.
func (n *Nodelet) apiSynced(ctx context.Context, pods []*v1.Pod) {
	for _, p := range pods {
		n.statuses.MarkDirty(p.UID) // statuses computed offline are written now
	}
	if n.offline != nil {
		n.offline.Synced(ctx, pods)
	}
}

// restoredPod reports whether p runs from the checkpoint (it was admitted
// before nodelet restarted: not admitted again).
func (n *Nodelet) restoredPod(ctx context.Context, p *v1.Pod) bool {
	if n.offline == nil || !n.offline.Restored(p.UID) {
		return false
	}
	klog.FromContext(ctx).Info("Running a pod from the offline checkpoint", "pod", klog.KObj(p), "podUID", p.UID)
	return true
}

// offlineInfo is the offline state for /healthz?verbose.
func (n *Nodelet) offlineInfo() string {
	if n.offline == nil {
		if n.client == nil {
			return "standalone"
		}
		return "offline autonomy off"
	}
	return n.offline.State().Describe(n.clock.Now())
}
