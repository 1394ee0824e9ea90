package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// GCPolicy is the container garbage collection's policy, as upstream's
// (--minimum-container-ttl-duration, --maximum-dead-containers-per-container,
// --maximum-dead-containers).
type GCPolicy struct {
	// MinAge: a dead container younger than this stays.
	MinAge time.Duration
	// MaxPerPodContainer dead instances of one container of one pod stay
	// (less than 0: any number).
	MaxPerPodContainer int
	// MaxContainers dead containers stay on the node (less than 0: any
	// number).
	MaxContainers int
	// KeepOneOfRunningPods keeps the newest dead instance of each
	// container of a pod whose sandbox is ready whatever
	// MaxPerPodContainer says: its completed init containers and the
	// previous instance its status reports stay.
	KeepOneOfRunningPods bool
}

// DefaultGCPolicy is upstream's: one dead instance per container, no
// minimum age, no global limit.
var DefaultGCPolicy = GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// GCPods tells the collector about pods: whether everything a pod left in
// the runtime may go (it is deleted, gone from its source, or evicted).
type GCPods interface {
	Removable(uid string) bool
}

// createdGrace protects a container created but not started yet (its
// start is a moment away) from a collection without a minimum age.
const createdGrace = time.Minute

// deadContainer is a container the collector may remove.
type deadContainer struct {
	id, podUID, name, sandboxID string
	created                     time.Time
}

// SelectDead picks the dead containers to remove, as upstream: those older
// than the minimum age, all of a removable pod's, then the oldest beyond
// MaxPerPodContainer per pod and container name, then the oldest beyond
// MaxContainers on the node (each container keeping at least one when the
// limit is spread).
func selectDead(dead []deadContainer, p GCPolicy, now time.Time, removable func(uid string) bool, running map[string]bool) []deadContainer {
	type unit struct{ uid, name string }
	units := map[unit][]deadContainer{}
	var out []deadContainer
	for _, c := range dead {
		if now.Sub(c.created) < p.MinAge {
			continue
		}
		if removable(c.podUID) {
			out = append(out, c)
			continue
		}
		u := unit{c.podUID, c.name}
		units[u] = append(units[u], c)
	}
	newestFirst := func(cs []deadContainer) {
		sort.Slice(cs, func(i, j int) bool { return cs[i].created.After(cs[j].created) })
	}
	keep := func(limit int) {
		for u, cs := range units {
			newestFirst(cs)
			limit := limit
			if p.KeepOneOfRunningPods && running[u.uid] && limit >= 0 {
				limit = max(limit, 1)
			}
			if limit >= 0 && len(cs) > limit {
				out = append(out, cs[limit:]...)
				units[u] = cs[:limit]
			}
		}
	}
	keep(p.MaxPerPodContainer)
	total := 0
	for _, cs := range units {
		total += len(cs)
	}
	if p.MaxContainers >= 0 && total > p.MaxContainers {
		perUnit := max(p.MaxContainers/max(len(units), 1), 1)
		keep(perUnit)
		var rest []deadContainer
		for _, cs := range units {
			rest = append(rest, cs...)
		}
		if len(rest) > p.MaxContainers {
			newestFirst(rest)
			out = append(out, rest[p.MaxContainers:]...)
		}
	}
	return out
}

// GarbageCollect removes dead containers as the policy says, with their
// logs, then the sandboxes left without containers that are not ready:
// all of a removable pod's, all but the newest of the others. Only with
// every pod source seen (allSourcesReady) is a pod taken for removable.
func (m *Manager) GarbageCollect(ctx context.Context, p GCPolicy, pods GCPods, allSourcesReady bool) error {
	removable := func(uid string) bool { return allSourcesReady && pods.Removable(uid) }
	now := m.clock.Now()
	containers, err := m.rt.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var dead []deadContainer
	for _, c := range containers {
		created := time.Unix(0, c.CreatedAt)
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			continue
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			if now.Sub(created) < createdGrace {
				continue
			}
		}
		dead = append(dead, deadContainer{
			id: c.Id, podUID: c.Labels[PodUIDLabel], name: c.Labels[ContainerNameLabel], sandboxID: c.PodSandboxId, created: created,
		})
	}
	sandboxes, err := m.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	running := map[string]bool{}
	for _, s := range sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			running[s.GetMetadata().GetUid()] = true
		}
	}
	var errs []error
	removed := map[string]bool{}
	for _, c := range selectDead(dead, p, now, removable, running) {
		if err := m.removeDeadContainer(ctx, c.id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed[c.id] = true
	}
	if len(removed) > 0 {
		klog.FromContext(ctx).V(2).Info("Removed dead containers", "count", len(removed))
	}
	errs = append(errs, m.collectSandboxes(ctx, sandboxes, containers, removed, removable))
	return errors.Join(errs...)
}

// DeleteAllUnusedContainers removes the dead containers, the eviction
// manager's node-level reclaim under disk pressure: every one of the pods
// that do not run, all but the newest instance of each container of those
// that do (upstream removes those too, which may run a pod's init
// containers again).
func (m *Manager) DeleteAllUnusedContainers(ctx context.Context, pods GCPods) error {
	return m.GarbageCollect(ctx, GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1, KeepOneOfRunningPods: true}, pods, true)
}

// removeDeadContainer removes a container and its log files.
func (m *Manager) removeDeadContainer(ctx context.Context, id string) error {
	var logPath string
	if st, err := m.rt.ContainerStatus(ctx, id, false); err == nil {
		logPath = st.GetStatus().GetLogPath()
	}
	if err := m.rt.RemoveContainer(ctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	m.forgetContainer(id)
	removeContainerLogs(logPath)
	return nil
}

// collectSandboxes removes the sandboxes that are not ready and hold no
// container: a removable pod's all, the others' but the newest.
func (m *Manager) collectSandboxes(ctx context.Context, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, removed map[string]bool, removable func(string) bool) error {
	busy := map[string]bool{}
	for _, c := range containers {
		if !removed[c.Id] {
			busy[c.PodSandboxId] = true
		}
	}
	newest := map[string]*runtimeapi.PodSandbox{}
	for _, s := range sandboxes {
		uid := s.GetMetadata().GetUid()
		if n := newest[uid]; n == nil || s.CreatedAt > n.CreatedAt {
			newest[uid] = s
		}
	}
	var errs []error
	for _, s := range sandboxes {
		uid := s.GetMetadata().GetUid()
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY || busy[s.Id] || (newest[uid] == s && !removable(uid)) {
			continue
		}
		if err := m.rt.RemovePodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}
