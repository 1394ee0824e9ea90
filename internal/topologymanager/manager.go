package topologymanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
)

// The scopes, upstream's names.
const (
	ScopeContainer = "container"
	ScopePod       = "pod"
)

// ErrorTopologyAffinity is the reason of a pod the policy cannot align.
const ErrorTopologyAffinity = "TopologyAffinityError"

// TopologyAffinityError is upstream's refusal of a pod whose resources
// cannot be aligned as the policy asks.
type TopologyAffinityError struct{}

func (TopologyAffinityError) Error() string {
	return "Resources cannot be allocated with Topology locality"
}

// Type is the admission reason.
func (TopologyAffinityError) Type() string { return ErrorTopologyAffinity }

// Provider is a hint provider (upstream's HintProvider): a resource
// manager that says where it could satisfy a container or a pod and then
// allocates with the affinity the policy chose.
type Provider interface {
	// TopologyHints are the container's hints by resource: none (nil or
	// empty map) is no preference; a resource with an empty list cannot
	// be satisfied anywhere.
	TopologyHints(ctx context.Context, pod *v1.Pod, c *v1.Container) map[string][]TopologyHint
	// PodTopologyHints are the same for the whole pod (the pod scope).
	PodTopologyHints(ctx context.Context, pod *v1.Pod) map[string][]TopologyHint
	// Allocate gives the container its resources, aligned with affinity
	// when it has one. An error refuses the pod.
	Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, affinity TopologyHint) error
}

// Config configures a Manager.
type Config struct {
	// Policy is topologyManagerPolicy (default none); Scope is
	// topologyManagerScope (default container); Options are
	// topologyManagerPolicyOptions.
	Policy, Scope string
	Options       map[string]string
	// NUMA is the machine's NUMA nodes (ReadNUMAInfo). Required unless
	// the policy is none.
	NUMA *NUMAInfo
	// Providers in upstream's order (devices, CPUs, memory).
	Providers []Provider
	// Registerer takes upstream's topology manager metrics (none when
	// nil).
	Registerer prometheus.Registerer
	// Alignment are the aligned compute resources counters, shared with
	// the CPU manager (registered by their creator); private ones when
	// nil.
	Alignment *AlignmentMetrics
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
}

// Manager is the topology manager: the admission handler of the
// resource managers. Safe for concurrent use.
type Manager struct {
	cfg     Config
	policy  Policy
	metrics *metrics

	mu    sync.Mutex
	hints map[string]map[string]TopologyHint
}

// New validates the policy, scope and options as upstream does.
func New(cfg Config) (*Manager, error) {
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.Scope == "" {
		cfg.Scope = ScopeContainer
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Alignment == nil {
		cfg.Alignment = NewAlignmentMetrics(nil)
	}
	m := &Manager{cfg: cfg, hints: map[string]map[string]TopologyHint{}, metrics: newMetrics(cfg.Registerer)}
	if cfg.Policy == PolicyNone {
		m.policy = nonePolicy{}
		return m, nil
	}
	// Upstream's initializeMetrics, which its none policy skips.
	for _, scope := range []string{ScopeContainer, ScopePod} {
		cfg.Alignment.Init(scope, BoundaryNUMANode, true)
	}
	opts, err := NewPolicyOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	if cfg.NUMA == nil {
		return nil, errors.New("topologymanager: Config.NUMA is required")
	}
	if opts.PreferClosestNUMA {
		for _, n := range cfg.NUMA.Nodes {
			if len(cfg.NUMA.NUMADistances[n]) == 0 {
				return nil, fmt.Errorf("cannot discover NUMA topology: error getting NUMA distances from cadvisor")
			}
		}
	}
	if len(cfg.NUMA.Nodes) > opts.MaxAllowableNUMANodes {
		return nil, fmt.Errorf("unsupported on machines with more than %v NUMA Nodes", opts.MaxAllowableNUMANodes)
	}
	p, ok := NewPolicy(cfg.Policy, cfg.NUMA, opts)
	if !ok {
		return nil, fmt.Errorf("unknown policy: %q", cfg.Policy)
	}
	if cfg.Scope != ScopeContainer && cfg.Scope != ScopePod {
		return nil, fmt.Errorf("unknown scope: %q", cfg.Scope)
	}
	m.policy = p
	return m, nil
}

// Policy is the policy's name.
func (m *Manager) Policy() string { return m.policy.Name() }

// Affinity is the hint a container was admitted with (zero: none).
func (m *Manager) Affinity(uid, container string) TopologyHint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hints[uid][container]
}

// Release forgets a pod's hints.
func (m *Manager) Release(uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.hints, uid)
}

func (m *Manager) setHint(uid, container string, h TopologyHint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hints[uid] == nil {
		m.hints[uid] = map[string]TopologyHint{}
	}
	m.hints[uid][container] = h
}

// Admit is upstream's topology manager admission handler: under the
// none policy each container's resources are allocated, provider by
// provider; otherwise the providers' hints are merged per container (or
// once for the pod), a pod the policy cannot align is refused
// TopologyAffinityError, and the providers allocate with the merged
// affinity. A provider's error refuses the pod with its reason, else
// UnexpectedAdmissionError. A resize is admitted here (the managers do not
// resize what they pinned).
func (m *Manager) Admit(ctx context.Context, a admission.Attributes) admission.Result {
	m.metrics.requests.Inc()
	start := m.cfg.Clock.Now()
	defer func() { m.metrics.duration.Observe(float64(m.cfg.Clock.Since(start).Milliseconds())) }()
	if a.Operation == admission.OperationResize {
		// Counted as upstream (its handler sees resizes too); what a
		// resize may change is the allocation manager's decision (a
		// Guaranteed pod's CPU or memory resize is Infeasible under the
		// static policies).
		return admission.Result{Admit: true}
	}
	pod := a.Pod
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	switch {
	case m.policy.Name() == PolicyNone:
		for i := range containers {
			if err := m.allocate(ctx, pod, &containers[i], TopologyHint{}); err != nil {
				return Result(err)
			}
		}
	case m.cfg.Scope == ScopePod:
		var all []map[string][]TopologyHint
		for _, p := range m.cfg.Providers {
			all = append(all, p.PodTopologyHints(ctx, pod))
		}
		best, ok := m.policy.Merge(ctx, all)
		klog.FromContext(ctx).Info("Best TopologyHint", "bestHint", best, "pod", klog.KObj(pod), "scope", ScopePod)
		if !ok {
			return m.refuse(ScopePod)
		}
		for i := range containers {
			m.setHint(string(pod.UID), containers[i].Name, best)
			if err := m.allocate(ctx, pod, &containers[i], best); err != nil {
				m.metrics.errors.Inc()
				return Result(err)
			}
		}
		m.aligned(ScopePod)
	default:
		for i := range containers {
			c := &containers[i]
			var all []map[string][]TopologyHint
			for _, p := range m.cfg.Providers {
				all = append(all, p.TopologyHints(ctx, pod, c))
			}
			best, ok := m.policy.Merge(ctx, all)
			klog.FromContext(ctx).Info("Best TopologyHint", "bestHint", best, "pod", klog.KObj(pod), "containerName", c.Name)
			if !ok {
				return m.refuse(ScopeContainer)
			}
			m.setHint(string(pod.UID), c.Name, best)
			if err := m.allocate(ctx, pod, c, best); err != nil {
				m.metrics.errors.Inc()
				return Result(err)
			}
			m.aligned(ScopeContainer)
		}
	}
	return admission.Result{Admit: true}
}

func (m *Manager) allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, h TopologyHint) error {
	for _, p := range m.cfg.Providers {
		if err := p.Allocate(ctx, pod, c, h); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) refuse(scope string) admission.Result {
	if IsAlignmentGuaranteed(m.policy) {
		m.cfg.Alignment.Failed(scope, BoundaryNUMANode)
	}
	m.metrics.errors.Inc()
	return Result(TopologyAffinityError{})
}

func (m *Manager) aligned(scope string) {
	if IsAlignmentGuaranteed(m.policy) {
		m.cfg.Alignment.Aligned(scope, BoundaryNUMANode)
	}
}

// Result is upstream's GetPodAdmitResult: an error with a Type() gives
// its reason and message, any other UnexpectedAdmissionError.
func Result(err error) admission.Result {
	if err == nil {
		return admission.Result{Admit: true}
	}
	var typed interface {
		error
		Type() string
	}
	if errors.As(err, &typed) {
		return admission.Result{Reason: typed.Type(), Message: typed.Error()}
	}
	return admission.Result{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
}

// ReadNUMAInfo reads the NUMA nodes and their distances under root
// (sysfs' /sys/devices/system/node/nodeN/distance); a machine without
// them is one node 0.
func ReadNUMAInfo(root string) (*NUMAInfo, error) {
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	info := &NUMAInfo{NUMADistances: NUMADistances{}}
	for _, dir := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		info.Nodes = append(info.Nodes, id)
		raw, err := os.ReadFile(filepath.Join(dir, "distance"))
		if err != nil {
			continue // no distances: only prefer-closest-numa-nodes needs them
		}
		for _, f := range strings.Fields(string(raw)) {
			d, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s/distance: %w", dir, err)
			}
			info.NUMADistances[id] = append(info.NUMADistances[id], d)
		}
	}
	if len(info.Nodes) == 0 {
		info.Nodes = []int{0}
	}
	slices.Sort(info.Nodes)
	return info, nil
}

// metrics are upstream's topology manager metrics, same names.
type metrics struct {
	requests prometheus.Counter
	errors   prometheus.Counter
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_requests_total",
			Help: "[ALPHA] The number of admission requests where resources have to be aligned."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_errors_total",
			Help: "[ALPHA] The number of admission request failures where resources could not be aligned."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "topology_manager_admission_duration_ms",
			Help: "[ALPHA] Duration in milliseconds to serve a pod admission request.", Buckets: prometheus.ExponentialBuckets(.05, 2, 15)}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.errors, m.duration)
	}
	return m
}

// The alignment boundaries of the aligned compute resources counters,
// upstream's label values.
const (
	BoundaryNUMANode    = "numa_node"
	BoundaryPhysicalCPU = "physical_cpu"
	BoundaryUncoreCache = "uncore_cache"
)

// AlignmentMetrics are upstream's container_aligned_compute_resources_count
// and container_aligned_compute_resources_failure_count, by scope and
// boundary: the topology manager counts NUMA alignment, the CPU manager
// physical CPUs (full-pcpus-only) and uncore caches.
type AlignmentMetrics struct {
	aligned, failures *prometheus.CounterVec
}

// NewAlignmentMetrics returns the counters, registered with reg unless nil.
func NewAlignmentMetrics(reg prometheus.Registerer) *AlignmentMetrics {
	a := &AlignmentMetrics{
		aligned: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_count",
			Help: "[ALPHA] Cumulative number of aligned compute resources allocated to containers by alignment type."}, []string{"scope", "boundary"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_failure_count",
			Help: "[ALPHA] Cumulative number of failures to allocate aligned compute resources to containers by alignment type."}, []string{"scope", "boundary"}),
	}
	if reg != nil {
		reg.MustRegister(a.aligned, a.failures)
	}
	return a
}

// Init makes the series exist at zero: the aligned one, and the failure
// one too when withFailure.
func (a *AlignmentMetrics) Init(scope, boundary string, withFailure bool) {
	a.aligned.WithLabelValues(scope, boundary)
	if withFailure {
		a.failures.WithLabelValues(scope, boundary)
	}
}

// Aligned counts an aligned allocation.
func (a *AlignmentMetrics) Aligned(scope, boundary string) {
	a.aligned.WithLabelValues(scope, boundary).Inc()
}

// Failed counts an allocation that could not be aligned.
func (a *AlignmentMetrics) Failed(scope, boundary string) {
	a.failures.WithLabelValues(scope, boundary).Inc()
}
