package nodelet

import (
	"context"
	"errors"
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
	notifiers, err := n.memoryNotifiers(thresholds)
	if err != nil {
		klog.FromContext(ctx).Info("Memory pressure is observed every period only", "err", err)
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
		MemoryNotifiers:          notifiers,
		QuickSummary:             n.stats.QuickSummary,
		Clock:                    n.clock,
	})
}

// runningPods are the admitted pods that may be running: not finished (in
// the API or here), with a live worker, and not being stopped.
func (n *Nodelet) runningPods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range n.livePods() {
		if p.DeletionTimestamp == nil && !n.workers.Terminating(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

// livePods are the admitted pods not finished (in the API or here) whose
// worker has not finished, those being stopped included.
func (n *Nodelet) livePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range n.pods.Admitted("") {
		if podspec.IsTerminal(p.Status.Phase) || !n.workers.Live(p.UID) {
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
	e.n.workers.Interrupt(pod.UID)
}

// Reclaimed: evicted, or its worker finished (deleted meanwhile).
func (e evictor) Reclaimed(uid types.UID) bool {
	return e.n.podsync.Evicted(uid) || !e.n.workers.Live(uid)
}

// memoryNotifiers wake the eviction manager when a memory signal with a
// threshold crosses it: memory.available on the root memory cgroup,
// allocatableMemory.available on the pods' cgroup; on cgroup v1 the
// kernel's thresholds, on v2 a poll of the usage and the pods' cgroup's
// memory.events.
func (n *Nodelet) memoryNotifiers(ts []eviction.Threshold) (map[eviction.Signal]eviction.MemoryNotifier, error) {
	cg := n.machine.Cgroups
	if cg.Mount == "" {
		return nil, errors.New("no cgroup mount")
	}
	out := map[eviction.Signal]eviction.MemoryNotifier{}
	var errs []error
	pods := n.cgroups.PodsCgroup()
	for _, signal := range []eviction.Signal{eviction.MemoryAvailable, eviction.AllocatableMemoryAvailable} {
		if !slices.ContainsFunc(ts, func(t eviction.Threshold) bool { return t.Signal == signal }) {
			continue
		}
		var nf eviction.MemoryNotifier
		var err error
		switch {
		case !cg.V2 && signal == eviction.MemoryAvailable:
			nf, err = eviction.NewMemcgNotifier(filepath.Join(cg.Mount, "memory"))
		case !cg.V2:
			nf, err = eviction.NewMemcgNotifier(cg.Dir("memory", pods))
		case signal == eviction.MemoryAvailable:
			nf, err = eviction.NewPollNotifier(n.stats.NodeMemoryUsage, 0, "", n.clock)
		default:
			nf, err = eviction.NewPollNotifier(n.stats.PodsMemoryUsage, 0, filepath.Join(cg.Dir("memory", pods), "memory.events"), n.clock)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", signal, err))
			continue
		}
		out[signal] = nf
	}
	return out, errors.Join(errs...)
}
