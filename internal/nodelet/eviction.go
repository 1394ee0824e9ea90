package nodelet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/eviction"
	"github.com/nodelet/nodelet/internal/podspec"
)

// newEviction is the eviction manager of the configuration's thresholds,
// observing the stats summary and evicting through the pod workers; on
// cgroup v1 the kernel tells it when memory.available crosses a threshold.
func (n *Nodelet) newEviction(ctx context.Context) (*eviction.Manager, error) {
	cfg := &n.opts.Config
	thresholds, err := eviction.ParseThresholds(eviction.Settings{
		Hard: cfg.EvictionHard, Soft: cfg.EvictionSoft, SoftGracePeriod: cfg.EvictionSoftGracePeriod, MinimumReclaim: cfg.EvictionMinimumReclaim,
		PodsAllocatable: *cfg.CgroupsPerQOS && slices.Contains(cfg.EnforceNodeAllocatable, "pods"),
	})
	if err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	var notifier eviction.MemoryNotifier
	if cg := n.machine.Cgroups; !cg.V2 && cg.Mount != "" && hasMemoryThreshold(thresholds) {
		if notifier, err = eviction.NewMemcgNotifier(filepath.Join(cg.Mount, "memory")); err != nil {
			klog.FromContext(ctx).Info("Memory pressure is observed every period only", "err", err)
			notifier = nil
		}
	}
	return eviction.New(eviction.Config{
		Thresholds:               thresholds,
		PressureTransitionPeriod: cfg.EvictionPressureTransitionPeriod.Duration,
		Summary:                  n.stats,
		Recorder:                 n.recorder,
		Node:                     n.nodeRef(),
		NodeReclaim:              []eviction.Reclaimer{containerReclaim{n}, n.imageGC},
		ActivePods:               n.runningPods,
		Evictor:                  evictor{n},
		MaxPodGracePeriod:        int64(cfg.EvictionMaxPodGracePeriod),
		MemoryNotifier:           notifier,
		Clock:                    n.clock,
	})
}

// runningPods are the admitted pods that may be running: not finished (in
// the API or here) and not being stopped.
func (n *Nodelet) runningPods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range n.pods.Admitted("") {
		if podspec.IsTerminal(p.Status.Phase) || p.DeletionTimestamp != nil || !n.workers.Has(p.UID) || n.workers.Terminating(p.UID) {
			continue
		}
		if st, ok := n.statuses.Get(p.UID); ok && podspec.IsTerminal(st.Phase) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// evictor stops evicted pods through their workers (podsync.Evict).
type evictor struct{ n *Nodelet }

func (e evictor) Evict(_ context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) {
	e.n.podsync.Evict(pod.UID, grace, status)
	e.n.workers.Notify(pod.UID)
}

func (e evictor) Reclaimed(uid types.UID) bool {
	return e.n.podsync.Evicted(uid) || !e.n.workers.Has(uid)
}

func hasMemoryThreshold(ts []eviction.Threshold) bool {
	for _, t := range ts {
		if t.Signal == eviction.MemoryAvailable {
			return true
		}
	}
	return false
}
