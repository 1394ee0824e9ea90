package nodelet

import (
	"context"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/imagegc"
	"github.com/nodelet/nodelet/internal/kuberuntime"
)

// imageGCStateFile keeps the images' first-seen and last-used times.
const imageGCStateFile = "image-gc-state.json"

// newImageGC is the image collector of the configuration's policy.
func (n *Nodelet) newImageGC(rs internalapi.RuntimeService, is internalapi.ImageManagerService) (*imagegc.Manager, error) {
	cfg := &n.opts.Config
	return imagegc.New(imagegc.Config{
		Images:               is,
		Runtime:              rs,
		FsStats:              n.stats.ImageFsCapacity,
		HighThresholdPercent: int(*cfg.ImageGCHighThresholdPercent),
		LowThresholdPercent:  int(*cfg.ImageGCLowThresholdPercent),
		MinAge:               cfg.ImageMinimumGCAge.Duration,
		MaxAge:               cfg.ImageMaximumGCAge.Duration,
		Period:               n.opts.ImageGCPeriod,
		StateFile:            filepath.Join(n.opts.RootDir, imageGCStateFile),
		Recorder:             n.recorder,
		Node:                 n.nodeRef(),
		Clock:                n.clock,
	})
}

func (n *Nodelet) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: n.opts.NodeName, UID: types.UID(n.opts.NodeName)}
}

// containerGCPolicy is the flags' dead-container policy.
func (n *Nodelet) containerGCPolicy() kuberuntime.GCPolicy {
	p := n.opts.ContainerGC
	return kuberuntime.GCPolicy{MinAge: p.MinAge, MaxPerPodContainer: p.MaxPerPodContainer, MaxContainers: p.MaxContainers}
}

// runContainerGC collects dead containers and sandboxes every
// ContainerGCPeriod, as upstream every minute; a failure is a node event.
func (n *Nodelet) runContainerGC(ctx context.Context) {
	logger := klog.FromContext(ctx)
	tick := n.clock.NewTicker(n.opts.ContainerGCPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		if err := n.runtime.GarbageCollect(ctx, n.containerGCPolicy(), gcPods{n}, n.sourcesReady.Load()); err != nil {
			logger.Error(err, "Container garbage collection failed")
			n.recorder.Event(n.nodeRef(), v1.EventTypeWarning, "ContainerGCFailed", err.Error())
		}
	}
}

// gcPods tells the collectors which pods' leftovers may all go: evicted
// ones, and those no source wants and no worker handles.
type gcPods struct{ n *Nodelet }

func (g gcPods) Removable(uid string) bool {
	id := types.UID(uid)
	if g.n.podsync.Evicted(id) {
		return true
	}
	_, want := g.n.pods.Get(id)
	return !want && !g.n.workers.Has(id)
}

// containerReclaim is the eviction manager's node-level reclaim of dead
// containers.
type containerReclaim struct{ n *Nodelet }

func (c containerReclaim) Reclaim(ctx context.Context) error {
	return c.n.runtime.DeleteAllUnusedContainers(ctx, gcPods(c))
}
