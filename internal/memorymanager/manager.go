package memorymanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/memorymanager/state"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// DefaultPeriod is how often the assignments of pods no longer active are
// dropped (upstream drops them at each admission and container removal).
const DefaultPeriod = 10 * time.Second

// Config configures a Manager.
type Config struct {
	// Policy is memoryManagerPolicy: "None" (the default) or "Static".
	Policy string
	// ReservedMemory is reservedMemory (Static: required, and per type it
	// must add up to NodeReservation's).
	ReservedMemory []kubeletv1beta1.MemoryReservation
	// NodeReservation is the node allocatable reservation: kubeReserved +
	// systemReserved + the hard eviction thresholds.
	NodeReservation v1.ResourceList
	// Nodes are the machine's NUMA nodes (Discover). Required with Static.
	Nodes []NUMANode
	// Dir holds the checkpoint (the root directory); "" keeps the state in
	// memory.
	Dir string
	// ActivePods are the admitted pods not finished. Required.
	ActivePods func() []*v1.Pod
	// SourcesReady reports whether every pod source has been seen (stale
	// assignments are not dropped before). Required.
	SourcesReady func() bool
	// Period defaults to DefaultPeriod.
	Period time.Duration
	// Registerer takes upstream's memory_manager_* metrics (none when nil).
	Registerer prometheus.Registerer
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Manager is the memory manager. Safe for concurrent use.
type Manager struct {
	cfg     Config
	path    string
	metrics *metrics

	mu       sync.Mutex
	state    *state.State
	policy   *static
	admitted *admission.Admitted
}

// New returns the manager of cfg's policy, its state restored from the
// checkpoint and validated against the machine and the reservation as
// upstream does (an invalid state refuses to start: the node has to be
// drained and the file removed).
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.ActivePods == nil:
		return nil, errors.New("memorymanager: Config.ActivePods is required")
	case cfg.SourcesReady == nil:
		return nil, errors.New("memorymanager: Config.SourcesReady is required")
	}
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &Manager{cfg: cfg, admitted: admission.NewAdmitted(), metrics: newMetrics(cfg.Registerer)}
	if cfg.Dir != "" {
		m.path = filepath.Join(cfg.Dir, state.FileName)
	}
	var reserved reservedMemory
	switch cfg.Policy {
	case PolicyNone:
	case PolicyStatic:
		if len(cfg.Nodes) == 0 {
			return nil, errors.New("memorymanager: Config.Nodes is required with the Static policy")
		}
		var err error
		if reserved, err = reservation(cfg.Nodes, cfg.NodeReservation, cfg.ReservedMemory); err != nil {
			return nil, err
		}
		m.policy = &static{reusable: map[string]map[bitmask.Mask]map[v1.ResourceName]uint64{}}
	default:
		return nil, fmt.Errorf("unknown policy: %q", cfg.Policy)
	}
	s, err := state.Load(m.path, cfg.Policy)
	if err != nil {
		return nil, err
	}
	if cfg.Policy == PolicyStatic {
		if err := validateState(s, cfg.Nodes, reserved); err != nil {
			return nil, state.Corrupt(m.path, err)
		}
	}
	m.state = s
	if err := s.Store(m.path); err != nil {
		return nil, fmt.Errorf("memory manager checkpoint: %w", err)
	}
	return m, nil
}

// Policy is the policy's name.
func (m *Manager) Policy() string { return m.cfg.Policy }

// TopologyHints are the container's memory hints by type (upstream's
// static GetTopologyHints): for a Guaranteed pod, the NUMA node sets that
// can hold its request (the fewest preferred), or those it already holds.
func (m *Manager) TopologyHints(ctx context.Context, pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	if m.cfg.Policy != PolicyStatic || !pinned(pod) {
		return nil
	}
	req, err := containerRequests(c)
	if err != nil || len(req) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	if blocks := m.state.Blocks(uid, c.Name); blocks != nil {
		return regenerateHints(blocks, req)
	}
	return byName(m.policy.calculateHints(m.state.Machine, uid, req))
}

// PodTopologyHints are the pod's memory hints (the pod scope): for what
// its containers need at once.
func (m *Manager) PodTopologyHints(ctx context.Context, pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	if m.cfg.Policy != PolicyStatic || !pinned(pod) {
		return nil
	}
	req, err := podRequests(pod)
	if err != nil || len(req) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if blocks := m.state.Blocks(uid, c.Name); blocks != nil {
			return regenerateHints(blocks, req)
		}
	}
	return byName(m.policy.calculateHints(m.state.Machine, uid, req))
}

// Allocate gives a container of a Guaranteed pod being admitted its
// memory and huge pages (upstream's static Allocate) from the NUMA nodes
// of affinity, or from the fewest nodes that hold them without one; init
// containers' memory is reused by the containers after them. An error
// refuses the pod (UnexpectedAdmissionError, upstream's words). A resize
// is not handled here: the allocation manager refuses a Guaranteed pod's
// memory resize under Static (Infeasible), as upstream.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, affinity topologymanager.TopologyHint) error {
	if m.cfg.Policy != PolicyStatic || !pinned(pod) {
		return nil
	}
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	had := m.state.Blocks(uid, c.Name) != nil
	asked, err := m.policy.allocate(m.state, pod, c, affinity)
	if asked {
		m.metrics.pinningRequests.Inc()
	}
	if err != nil {
		m.metrics.pinningErrors.Inc()
		logger.Error(err, "Allocate error", "pod", klog.KObj(pod), "containerName", c.Name)
		return err
	}
	if !asked || had {
		return nil
	}
	m.admitted.Add(uid, m.cfg.Clock.Now())
	logger.Info("Allocated memory", "pod", klog.KObj(pod), "containerName", c.Name, "numaNodes", m.numaLocked(uid, c.Name).String(), "affinity", affinity)
	if err := m.state.Store(m.path); err != nil {
		return fmt.Errorf("memory manager checkpoint: %w", err)
	}
	return nil
}

func (m *Manager) numaLocked(uid, container string) cpuset.CPUSet {
	var ids []int
	for _, b := range m.state.Blocks(uid, container) {
		ids = append(ids, b.NUMAAffinity...)
	}
	return cpuset.New(ids...)
}

// ContainerMems is the cpuset.mems a container is created with: the NUMA
// nodes of its blocks ("" when it has none: every node). As upstream's
// AddContainer, a container starting ends the pod's regular init
// containers before it: their memory is given back.
func (m *Manager) ContainerMems(ctx context.Context, pod *v1.Pod, container string) string {
	if m.cfg.Policy != PolicyStatic {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	// A container being created: the pod is past its admission (active).
	m.admitted.Forget(uid)
	changed := false
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		if ic.Name == container {
			break
		}
		if !podspec.IsSidecar(ic) && remove(m.state, uid, ic.Name) {
			changed = true
		}
	}
	if changed {
		if err := m.state.Store(m.path); err != nil {
			klog.FromContext(ctx).Error(err, "Could not write the memory manager checkpoint")
		}
	}
	mems := m.numaLocked(uid, container)
	if mems.IsEmpty() {
		return ""
	}
	return mems.String()
}

// Memory are a container's blocks (the pod-resources API's memory).
func (m *Manager) Memory(uid, container string) []state.Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.state.Blocks(uid, container))
}

// Allocatable are the blocks the node can pin, per NUMA node and type
// (Static; none otherwise).
func (m *Manager) Allocatable() []state.Block {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return allocatable(m.state.Machine)
}

// ContainerMemory is a container's memory as the pod-resources API
// reports it (upstream's containerMemoryFromBlock).
func (m *Manager) ContainerMemory(uid, container string) []*podresourcesv1.ContainerMemory {
	return toPodResources(m.Memory(uid, container))
}

// AllocatableMemory is the memory the node can pin as the pod-resources
// API reports it.
func (m *Manager) AllocatableMemory() []*podresourcesv1.ContainerMemory {
	return toPodResources(m.Allocatable())
}

func toPodResources(blocks []state.Block) []*podresourcesv1.ContainerMemory {
	var out []*podresourcesv1.ContainerMemory
	for _, b := range blocks {
		cm := &podresourcesv1.ContainerMemory{MemoryType: string(b.Type), Size: b.Size, Topology: &podresourcesv1.TopologyInfo{}}
		for _, id := range b.NUMAAffinity {
			cm.Topology.Nodes = append(cm.Topology.Nodes, &podresourcesv1.NUMANode{ID: int64(id)})
		}
		out = append(out, cm)
	}
	return out
}

// Release gives back a pod's memory (a pod the admission chain refused
// after this handler admitted it).
func (m *Manager) Release(ctx context.Context, uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.state.Assignments[uid]) == 0 {
		return
	}
	m.releaseLocked(uid)
	if err := m.state.Store(m.path); err != nil {
		klog.FromContext(ctx).Error(err, "Could not write the memory manager checkpoint")
	}
}

func (m *Manager) releaseLocked(uid string) {
	for name := range m.state.Assignments[uid] {
		remove(m.state, uid, name)
	}
	m.admitted.Forget(uid)
}

// removeStale drops the blocks of containers not in an active pod
// (upstream's removeStaleState), once every source is ready.
func (m *Manager) removeStale(ctx context.Context, active []*v1.Pod) {
	if !m.cfg.SourcesReady() {
		return
	}
	live := podspec.ContainerNames(active)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admitted.Sweep(live, m.cfg.Clock.Now())
	changed := false
	for _, uid := range m.state.Pods() {
		if m.admitted.Has(uid) {
			continue
		}
		for name := range m.state.Assignments[uid] {
			if live[uid][name] {
				continue
			}
			klog.FromContext(ctx).Info("Releasing the memory of a container no longer active", "podUID", uid, "containerName", name)
			remove(m.state, uid, name)
			changed = true
		}
	}
	if changed {
		if err := m.state.Store(m.path); err != nil {
			klog.FromContext(ctx).Error(err, "Could not write the memory manager checkpoint")
		}
	}
}

// Run drops the assignments of pods no longer active every period until
// ctx is done (Static only).
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Policy != PolicyStatic {
		<-ctx.Done()
		return nil
	}
	klog.FromContext(ctx).Info("Memory manager started", "policy", m.cfg.Policy, "allocatable", len(m.Allocatable()))
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.removeStale(ctx, m.cfg.ActivePods())
		}
	}
}

// metrics are upstream's memory manager metrics, same names.
type metrics struct {
	pinningRequests prometheus.Counter
	pinningErrors   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pinningRequests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "memory_manager_pinning_requests_total",
			Help: "[ALPHA] The number of memory pages allocations which required pinning."}),
		pinningErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "memory_manager_pinning_errors_total",
			Help: "[ALPHA] The number of memory pages allocations which required pinning that failed."}),
	}
	if reg != nil {
		reg.MustRegister(m.pinningRequests, m.pinningErrors)
	}
	return m
}
