package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/admission"
	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// DefaultReconcilePeriod is upstream's cpuManagerReconcilePeriod default.
const DefaultReconcilePeriod = 10 * time.Second

// Runtime is what the reconcile loop needs of CRI.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
}

// Config configures a Manager.
type Config struct {
	// Policy is cpuManagerPolicy: "none" (the default) or "static".
	Policy string
	// Options is cpuManagerPolicyOptions.
	Options map[string]string
	// AlphaOptions and BetaOptions are the CPUManagerPolicyAlphaOptions
	// and CPUManagerPolicyBetaOptions gates.
	AlphaOptions, BetaOptions bool
	// ReservedSystemCPUs is reservedSystemCPUs ("" none).
	ReservedSystemCPUs string
	// Reserved is kubeReserved.cpu + systemReserved.cpu.
	Reserved resource.Quantity
	// ReconcilePeriod defaults to DefaultReconcilePeriod.
	ReconcilePeriod time.Duration
	// Dir holds the checkpoint (the root directory); "" keeps the state in
	// memory.
	Dir string
	// Topology is the machine's CPUs. Required.
	Topology *Topology
	// ActivePods are the admitted pods not finished: a pod's exclusive CPUs
	// return to the shared pool once it is not among them. Required.
	ActivePods func() []*v1.Pod
	// SourcesReady reports whether every pod source has been seen (stale
	// assignments are not dropped before). Required.
	SourcesReady func() bool
	// Runtime is CRI. Required with the static policy.
	Runtime Runtime
	// TopologyPolicy is topologyManagerPolicy (align-by-socket refuses
	// single-numa-node).
	TopologyPolicy string
	// Registerer takes upstream's cpu_manager_* metrics (none when nil).
	Registerer prometheus.Registerer
	// Alignment are the aligned compute resources counters the topology
	// manager shares (physical_cpu and uncore_cache are the CPU
	// manager's); private ones when nil.
	Alignment *topologymanager.AlignmentMetrics
	// Clock defaults to the real clock.
	Clock clock.WithTicker
}

// Manager is the CPU manager. Safe for concurrent use.
type Manager struct {
	cfg      Config
	opts     Options
	path     string
	reserved cpuset.CPUSet
	metrics  *metrics

	mu    sync.Mutex
	state *state
	// applied is the cpuset each running container was last given (at
	// creation or by the reconcile loop), by pod UID and container name.
	applied map[string]map[string]cpuset.CPUSet
	// admitted are the pods given CPUs at admission and not yet seen
	// among the active pods: their CPUs are kept meanwhile.
	admitted *admission.Admitted
	// reuse are the CPUs of the pod being admitted that its containers
	// after its init containers may take (upstream's cpusToReuse).
	reuse map[string]cpuset.CPUSet
}

// New returns the manager of cfg's policy, its state restored from the
// checkpoint and validated against the machine as upstream does (an
// invalid state refuses to start: the node has to be drained and the file
// removed).
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Topology == nil:
		return nil, errors.New("cpumanager: Config.Topology is required")
	case cfg.ActivePods == nil:
		return nil, errors.New("cpumanager: Config.ActivePods is required")
	case cfg.SourcesReady == nil:
		return nil, errors.New("cpumanager: Config.SourcesReady is required")
	}
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.ReconcilePeriod <= 0 {
		cfg.ReconcilePeriod = DefaultReconcilePeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Alignment == nil {
		cfg.Alignment = topologymanager.NewAlignmentMetrics(nil)
	}
	opts, err := ParseOptions(cfg.Policy, cfg.Options, cfg.AlphaOptions, cfg.BetaOptions)
	if err != nil {
		return nil, err
	}
	if err := opts.ValidateWithTopology(cfg.Topology, cfg.TopologyPolicy); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, opts: opts, reserved: cpuset.New(), applied: map[string]map[string]cpuset.CPUSet{}, admitted: admission.NewAdmitted(), reuse: map[string]cpuset.CPUSet{}}
	if cfg.Dir != "" {
		m.path = filepath.Join(cfg.Dir, StateFile)
	}
	explicit, err := cpuset.Parse(cfg.ReservedSystemCPUs)
	if err != nil {
		return nil, fmt.Errorf("reservedSystemCPUs %q: %w", cfg.ReservedSystemCPUs, err)
	}
	switch cfg.Policy {
	case PolicyNone:
	case PolicyStatic:
		if cfg.Runtime == nil {
			return nil, errors.New("cpumanager: Config.Runtime is required with the static policy")
		}
		if m.reserved, err = ReservedCPUs(cfg.Topology, opts, explicit, cfg.Reserved); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown policy: %q", cfg.Policy)
	}
	if m.state, err = loadState(m.path, cfg.Policy); err != nil {
		return nil, err
	}
	if cfg.Policy == PolicyStatic {
		if err := validateState(m.state, cfg.Topology.All(), m.reserved, opts.StrictCPUReservation); err != nil {
			return nil, corruptState(m.path, err)
		}
	}
	if err := m.state.store(m.path); err != nil {
		return nil, fmt.Errorf("cpu manager checkpoint: %w", err)
	}
	m.metrics = newMetrics(cfg.Registerer)
	if cfg.Policy == PolicyStatic {
		cfg.Alignment.Init(topologymanager.ScopeContainer, topologymanager.BoundaryPhysicalCPU, true)
		cfg.Alignment.Init(topologymanager.ScopeContainer, topologymanager.BoundaryUncoreCache, false)
	}
	m.updateMetrics()
	return m, nil
}

// Policy is the policy's name.
func (m *Manager) Policy() string { return m.cfg.Policy }

// Reserved is the set of reserved CPUs (static policy; empty otherwise).
func (m *Manager) Reserved() cpuset.CPUSet { return m.reserved }

// Allocatable are the CPUs that can be assigned exclusively (static
// policy: all but the reserved; none: none), as the pod-resources API
// reports them.
func (m *Manager) Allocatable() cpuset.CPUSet {
	if m.cfg.Policy != PolicyStatic {
		return cpuset.New()
	}
	return m.cfg.Topology.All().Difference(m.reserved)
}

// Exclusive are the CPUs assigned to a container alone (empty when none).
func (m *Manager) Exclusive(uid, container string) cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set, ok := m.state.assignments[uid][container]; ok {
		return set
	}
	return cpuset.New()
}

// ContainerCPUs is the cpuset a container is created with: its exclusive
// CPUs, else the shared pool; empty under the none policy (the runtime's
// default, every CPU). It is remembered as applied.
func (m *Manager) ContainerCPUs(uid, container string) cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.Policy != PolicyStatic {
		return cpuset.New()
	}
	// A container being created: the pod is past its admission (active).
	m.admitted.Forget(uid)
	set := m.cpusLocked(uid, container)
	m.setApplied(uid, container, set)
	return set
}

func (m *Manager) cpusLocked(uid, container string) cpuset.CPUSet {
	if set, ok := m.state.assignments[uid][container]; ok {
		return set
	}
	return m.state.defaultSet
}

func (m *Manager) setApplied(uid, container string, set cpuset.CPUSet) {
	if m.applied[uid] == nil {
		m.applied[uid] = map[string]cpuset.CPUSet{}
	}
	m.applied[uid][container] = set
}

// TopologyHints are the container's CPU hints (upstream's static
// GetTopologyHints): the NUMA node sets with enough free CPUs (the pod's
// reusable ones included), the narrowest possible preferred; none when it
// gets no exclusive CPUs.
func (m *Manager) TopologyHints(ctx context.Context, pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	n := guaranteedCPUs(pod, c)
	if n == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	if set, ok := m.state.assignments[uid][c.Name]; ok {
		if set.Size() != n {
			return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): {}}
		}
		return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): m.hints(set, cpuset.New(), n)}
	}
	return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): m.hints(m.available(), m.reuse[uid], n)}
}

// PodTopologyHints are the pod's CPU hints (the pod scope): for what its
// containers need at once (upstream's podGuaranteedCPUs).
func (m *Manager) PodTopologyHints(ctx context.Context, pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	n := podGuaranteedCPUs(pod)
	if n == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	assigned := cpuset.New()
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if set, ok := m.state.assignments[uid][c.Name]; ok {
			if set.Size() != guaranteedCPUs(pod, &c) {
				return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): {}}
			}
			assigned = assigned.Union(set)
		}
	}
	if assigned.Size() == n {
		return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): m.hints(assigned, cpuset.New(), n)}
	}
	return map[string][]topologymanager.TopologyHint{string(v1.ResourceCPU): m.hints(m.available(), m.reuse[uid].Union(assigned), n)}
}

// available are the CPUs that can be given exclusively now: the shared
// pool less the reserved.
func (m *Manager) available() cpuset.CPUSet {
	return m.state.defaultSet.Difference(m.reserved)
}

// hints is upstream's generateCPUTopologyHints: every set of NUMA nodes
// holding the reusable CPUs and, with the available ones, request CPUs; a
// set as small as the smallest that could hold request CPUs of the
// machine is preferred.
func (m *Manager) hints(available, reusable cpuset.CPUSet, request int) []topologymanager.TopologyHint {
	t := m.cfg.Topology
	nodes := t.CPUDetails.NUMANodes().List()
	minSize := len(nodes)
	out := []topologymanager.TopologyHint{}
	bitmask.Iterate(nodes, func(mask bitmask.Mask) {
		if t.CPUDetails.CPUsInNUMANodes(mask.Bits()...).Size() >= request && mask.Count() < minSize {
			minSize = mask.Count()
		}
		matching := 0
		for _, id := range reusable.List() {
			if !mask.IsSet(t.CPUDetails[id].NUMANodeID) {
				return
			}
			matching++
		}
		for _, id := range available.List() {
			if mask.IsSet(t.CPUDetails[id].NUMANodeID) {
				matching++
			}
		}
		if matching >= request {
			out = append(out, topologymanager.TopologyHint{NUMANodeAffinity: mask})
		}
	})
	for i := range out {
		out[i].Preferred = out[i].NUMANodeAffinity.Count() == minSize ||
			m.opts.AlignBySocket && m.isHintSocketAligned(out[i], minSize)
	}
	return out
}

// isHintSocketAligned is upstream's: the hint's NUMA nodes span as few
// sockets as the smallest set that could hold the request.
func (m *Manager) isHintSocketAligned(h topologymanager.TopologyHint, minAffinitySize int) bool {
	t := m.cfg.Topology
	perSocket := t.NumNUMANodes / t.NumSockets
	if perSocket == 0 {
		return false
	}
	minSockets := (minAffinitySize + perSocket - 1) / perSocket
	return t.CPUDetails.SocketsInNUMANodes(h.NUMANodeAffinity.Bits()...).Size() == minSockets
}

// Allocate gives a container of a pod being admitted its exclusive CPUs
// (upstream's static Allocate): Guaranteed containers with integer CPU
// requests, from affinity's NUMA nodes first when it has some, reusing
// what the pod's init containers hold (not a sidecar's). SMTAlignmentError
// under full-pcpus-only. A container already in the state keeps its CPUs.
// A resize is not handled here: the allocation manager refuses a
// Guaranteed pod's CPU resize under the static policy (Infeasible).
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, affinity topologymanager.TopologyHint) error {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	n := guaranteedCPUs(pod, c)
	if n == 0 {
		return nil
	}
	logger := klog.FromContext(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	m.metrics.pinningRequests.Inc()
	set, ok := m.state.assignments[uid][c.Name]
	if !ok {
		var err error
		if set, err = m.take(logger, n, m.reuse[uid], affinity.NUMANodeAffinity); err != nil {
			m.metrics.pinningErrors.Inc()
			if m.opts.FullPhysicalCPUsOnly {
				m.cfg.Alignment.Failed(topologymanager.ScopeContainer, topologymanager.BoundaryPhysicalCPU)
			}
			logger.Error(err, "Unable to allocate exclusive CPUs", "pod", klog.KObj(pod), "container", c.Name, "numCPUs", n)
			return err
		}
		if m.opts.FullPhysicalCPUsOnly {
			m.cfg.Alignment.Aligned(topologymanager.ScopeContainer, topologymanager.BoundaryPhysicalCPU)
		}
		if m.cfg.Topology.UncoreAligned(set) {
			m.cfg.Alignment.Aligned(topologymanager.ScopeContainer, topologymanager.BoundaryUncoreCache)
		}
		m.state.set(uid, c.Name, set)
		m.state.defaultSet = m.state.defaultSet.Difference(set)
		m.admitted.Add(uid, m.cfg.Clock.Now())
		if err := m.state.store(m.path); err != nil {
			return fmt.Errorf("cpu manager checkpoint: %w", err)
		}
		m.updateMetrics()
		logger.Info("Allocated exclusive CPUs", "pod", klog.KObj(pod), "container", c.Name, "cpuset", set.String(), "affinity", affinity)
	}
	m.updateReuse(pod, c, set)
	return nil
}

// updateReuse is upstream's updateCPUsToReuse: a (non-sidecar) init
// container's CPUs may go to the containers after it; an app container's
// are no longer reusable. Only the pod being admitted is kept.
func (m *Manager) updateReuse(pod *v1.Pod, c *v1.Container, set cpuset.CPUSet) {
	uid := string(pod.UID)
	for other := range m.reuse {
		if other != uid {
			delete(m.reuse, other)
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			if !podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
				m.reuse[uid] = m.reuse[uid].Union(set)
			}
			return
		}
	}
	m.reuse[uid] = m.reuse[uid].Difference(set)
}

// take picks n exclusive CPUs from the free ones (the shared pool less
// the reserved) and reusable (the pod's init containers' CPUs), those on
// the NUMA nodes of affinity (their sockets with align-by-socket) first
// (upstream's allocateCPUs), as the options take them.
func (m *Manager) take(logger klog.Logger, n int, reusable cpuset.CPUSet, affinity bitmask.Mask) (cpuset.CPUSet, error) {
	t := m.cfg.Topology
	if m.opts.FullPhysicalCPUsOnly {
		perCore := t.CPUsPerCore()
		if n%perCore != 0 {
			return cpuset.New(), SMTAlignmentError{RequestedCPUs: n, CpusPerCore: perCore}
		}
		if avail := m.state.defaultSet.Difference(t.CoreSiblings(m.reserved)).Size(); n > avail {
			return cpuset.New(), SMTAlignmentError{RequestedCPUs: n, CpusPerCore: perCore, AvailablePhysicalCPUs: avail, CausedByPhysicalCPUs: true}
		}
	}
	free := m.available().Union(reusable)
	result := cpuset.New()
	if affinity != 0 {
		aligned := free.Intersection(t.CPUDetails.CPUsInNUMANodes(affinity.Bits()...))
		if m.opts.AlignBySocket {
			aligned = free.Intersection(t.CPUDetails.CPUsInSockets(t.CPUDetails.SocketsInNUMANodes(affinity.Bits()...).UnsortedList()...))
		}
		var err error
		if result, err = m.opts.takeByTopology(logger, t, aligned, min(n, aligned.Size())); err != nil {
			return cpuset.New(), err
		}
	}
	rest, err := m.opts.takeByTopology(logger, t, free.Difference(result), n-result.Size())
	if err != nil {
		return cpuset.New(), err
	}
	return result.Union(rest), nil
}

// Release returns a pod's exclusive CPUs to the shared pool (a pod the
// admission chain refused after this handler admitted it).
func (m *Manager) Release(ctx context.Context, uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.state.assignments[uid]) == 0 {
		return
	}
	m.releaseLocked(uid)
	if err := m.state.store(m.path); err != nil {
		klog.FromContext(ctx).Error(err, "Could not write the CPU manager checkpoint")
	}
	m.updateMetrics()
}

// releaseLocked returns a pod's exclusive CPUs to the shared pool.
func (m *Manager) releaseLocked(uid string) {
	for name, set := range m.state.assignments[uid] {
		m.state.remove(uid, name)
		m.state.defaultSet = m.state.defaultSet.Union(set)
	}
	delete(m.applied, uid)
	m.admitted.Forget(uid)
	delete(m.reuse, uid)
}

// removeStale drops the assignments of pods and containers that are not
// active (upstream's removeStaleState), once every source is ready.
func (m *Manager) removeStale(ctx context.Context, active []*v1.Pod) {
	if !m.cfg.SourcesReady() {
		return
	}
	live := podspec.ContainerNames(active)
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	m.admitted.Sweep(live, m.cfg.Clock.Now())
	for uid, cs := range m.state.assignments {
		if m.admitted.Has(uid) {
			continue // admitted, not active yet
		}
		for name, set := range cs {
			if live[uid][name] {
				continue
			}
			klog.FromContext(ctx).Info("Releasing the exclusive CPUs of a container no longer active", "podUID", uid, "container", name, "cpuset", set.String())
			m.state.remove(uid, name)
			m.state.defaultSet = m.state.defaultSet.Union(set)
			changed = true
		}
	}
	for uid := range m.applied {
		if !m.admitted.Has(uid) && live[uid] == nil {
			delete(m.applied, uid)
		}
	}
	if changed {
		if err := m.state.store(m.path); err != nil {
			klog.FromContext(ctx).Error(err, "Could not write the CPU manager checkpoint")
		}
		m.updateMetrics()
	}
}

// Run reconciles every period until ctx is done (static policy only).
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Policy != PolicyStatic {
		<-ctx.Done()
		return nil
	}
	klog.FromContext(ctx).Info("CPU manager reconciling", "policy", m.cfg.Policy, "reconcilePeriod", m.cfg.ReconcilePeriod,
		"reserved", m.reserved.String(), "sharedPool", m.sharedPool().String())
	t := m.cfg.Clock.NewTicker(m.cfg.ReconcilePeriod)
	defer t.Stop()
	for {
		m.Reconcile(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (m *Manager) sharedPool() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.defaultSet
}

// Reconcile drops stale assignments and gives every running container of
// an active pod the cpuset it should have (its exclusive CPUs or the
// shared pool as it is now) when it was last given another (upstream's
// reconcileState). It returns how many containers were updated.
func (m *Manager) Reconcile(ctx context.Context) int {
	logger := klog.FromContext(ctx)
	active := m.cfg.ActivePods()
	m.removeStale(ctx, active)
	isActive := map[string]bool{}
	for _, p := range active {
		isActive[string(p.UID)] = true
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		logger.Error(err, "CPU manager: could not list the running containers")
		return 0
	}
	updated := 0
	for _, c := range ctrs {
		uid, name := c.Labels["io.kubernetes.pod.uid"], c.Labels["io.kubernetes.container.name"]
		if !isActive[uid] || name == "" {
			continue
		}
		m.mu.Lock()
		want, last := m.cpusLocked(uid, name), m.applied[uid][name]
		m.mu.Unlock()
		if want.IsEmpty() || want.Equals(last) {
			continue
		}
		if err := m.cfg.Runtime.UpdateContainerResources(ctx, c.Id, &runtimeapi.ContainerResources{
			Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: want.String()}}); err != nil {
			logger.Error(err, "CPU manager: could not update the container's cpuset", "podUID", uid, "container", name, "containerID", c.Id, "cpuset", want.String())
			continue
		}
		logger.V(2).Info("CPU manager: updated the container's cpuset", "podUID", uid, "container", name, "containerID", c.Id, "cpuset", want.String())
		m.mu.Lock()
		m.setApplied(uid, name, want)
		m.mu.Unlock()
		updated++
	}
	return updated
}

// metrics are upstream's CPU manager metrics, same names.
type metrics struct {
	pinningRequests prometheus.Counter
	pinningErrors   prometheus.Counter
	sharedPool      prometheus.Gauge
	exclusive       prometheus.Gauge
	perNUMA         *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pinningRequests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "cpu_manager_pinning_requests_total",
			Help: "[ALPHA] The number of cpu core allocations which required pinning."}),
		pinningErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "cpu_manager_pinning_errors_total",
			Help: "[ALPHA] The number of cpu core allocations which required pinning failed."}),
		sharedPool: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_shared_pool_size_millicores",
			Help: "[ALPHA] The size of the shared CPU pool for non-guaranteed QoS pods, in millicores."}),
		exclusive: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_exclusive_cpu_allocation_count",
			Help: "[ALPHA] The total number of CPUs exclusively allocated to containers running on this node"}),
		perNUMA: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_allocation_per_numa",
			Help: "[ALPHA] Number of CPUs allocated per NUMA node"}, []string{"numa_node"}),
	}
	if reg != nil {
		reg.MustRegister(m.pinningRequests, m.pinningErrors, m.sharedPool, m.exclusive, m.perNUMA)
	}
	return m
}

// updateMetrics sets the gauges from the state (static policy); mu held
// or not yet shared.
func (m *Manager) updateMetrics() {
	if m.cfg.Policy != PolicyStatic {
		return
	}
	m.metrics.sharedPool.Set(float64(m.state.defaultSet.Size() * 1000))
	excl := m.state.exclusive()
	m.metrics.exclusive.Set(float64(excl.Size()))
	counts := map[int]int{}
	for _, n := range m.cfg.Topology.CPUDetails.NUMANodes().UnsortedList() {
		counts[n] = 0
	}
	for _, id := range excl.UnsortedList() {
		counts[m.cfg.Topology.CPUDetails[id].NUMANodeID]++
	}
	for n, c := range counts {
		m.metrics.perNUMA.WithLabelValues(strconv.Itoa(n)).Set(float64(c))
	}
}
