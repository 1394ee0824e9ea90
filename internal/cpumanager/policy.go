package cpumanager

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// The policies, as upstream's cpuManagerPolicy values.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// The static policy's options, upstream's names.
const (
	OptionFullPCPUsOnly            = "full-pcpus-only"
	OptionStrictCPUReservation     = "strict-cpu-reservation"
	OptionDistributeCPUsAcrossNUMA = "distribute-cpus-across-numa"
	OptionAlignBySocket            = "align-by-socket"
	OptionDistributeAcrossCores    = "distribute-cpus-across-cores"
	OptionPreferAlignByUncoreCache = "prefer-align-cpus-by-uncorecache"
)

// Options are the static policy's options, upstream's
// StaticPolicyOptions (same field names).
type Options struct {
	// FullPhysicalCPUsOnly (full-pcpus-only): exclusive CPUs are whole
	// cores only (SMTAlignmentError otherwise).
	FullPhysicalCPUsOnly bool
	// DistributeCPUsAcrossNUMA (distribute-cpus-across-numa): an
	// allocation that needs several NUMA nodes is spread evenly over them.
	DistributeCPUsAcrossNUMA bool
	// AlignBySocket (align-by-socket): CPUs are aligned at the socket
	// rather than the NUMA node.
	AlignBySocket bool
	// DistributeCPUsAcrossCores (distribute-cpus-across-cores): a
	// container's CPUs spread over cores rather than filling them.
	DistributeCPUsAcrossCores bool
	// StrictCPUReservation (strict-cpu-reservation): the reserved CPUs are
	// out of the shared pool too (only system daemons run there).
	StrictCPUReservation bool
	// PreferAlignByUncoreCacheOption (prefer-align-cpus-by-uncorecache):
	// a container's CPUs come from the fewest uncore (L3) caches, best
	// effort.
	PreferAlignByUncoreCacheOption bool
}

// ParseOptions reads cpuManagerPolicyOptions for policy as upstream's
// NewStaticPolicyOptions: an unknown option, an alpha or beta one without
// its gate (CPUManagerPolicyAlphaOptions, CPUManagerPolicyBetaOptions), a
// value that is not a boolean, or two options that exclude each other are
// errors with upstream's words.
func ParseOptions(policy string, opts map[string]string, alphaGate, betaGate bool) (Options, error) {
	var o Options
	if len(opts) > 0 && policy != PolicyStatic {
		return o, fmt.Errorf("cpuManagerPolicyOptions %v: options are only valid with the static policy (cpuManagerPolicy is %q)", opts, policy)
	}
	fields := map[string]*bool{
		OptionFullPCPUsOnly:            &o.FullPhysicalCPUsOnly,
		OptionDistributeCPUsAcrossNUMA: &o.DistributeCPUsAcrossNUMA,
		OptionAlignBySocket:            &o.AlignBySocket,
		OptionDistributeAcrossCores:    &o.DistributeCPUsAcrossCores,
		OptionStrictCPUReservation:     &o.StrictCPUReservation,
		OptionPreferAlignByUncoreCache: &o.PreferAlignByUncoreCacheOption,
	}
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		field, ok := fields[name]
		switch {
		case !ok:
			return o, fmt.Errorf("unknown CPU Manager Policy option: %q", name)
		case (name == OptionAlignBySocket || name == OptionDistributeAcrossCores) && !alphaGate:
			return o, fmt.Errorf("CPU Manager Policy Alpha-level Options not enabled, but option %q provided", name)
		case name == OptionDistributeCPUsAcrossNUMA && !betaGate:
			return o, fmt.Errorf("CPU Manager Policy Beta-level Options not enabled, but option %q provided", name)
		}
		v, err := strconv.ParseBool(opts[name])
		if err != nil {
			return o, fmt.Errorf("bad value for option %q: %w", name, err)
		}
		*field = v
	}
	for _, pair := range []struct {
		a, b   bool
		na, nb string
	}{
		{o.FullPhysicalCPUsOnly, o.DistributeCPUsAcrossCores, OptionFullPCPUsOnly, OptionDistributeAcrossCores},
		{o.DistributeCPUsAcrossNUMA, o.DistributeCPUsAcrossCores, OptionDistributeCPUsAcrossNUMA, OptionDistributeAcrossCores},
		{o.PreferAlignByUncoreCacheOption, o.DistributeCPUsAcrossCores, OptionPreferAlignByUncoreCache, OptionDistributeAcrossCores},
		{o.PreferAlignByUncoreCacheOption, o.DistributeCPUsAcrossNUMA, OptionPreferAlignByUncoreCache, OptionDistributeCPUsAcrossNUMA},
	} {
		if pair.a && pair.b {
			return o, fmt.Errorf("static policy options %s and %s can not be used at the same time", pair.na, pair.nb)
		}
	}
	return o, nil
}

// ValidateWithTopology is upstream's ValidateStaticPolicyOptions: options
// the machine or the topology manager's policy cannot honour.
func (o Options) ValidateWithTopology(t *Topology, topologyPolicy string) error {
	if !o.AlignBySocket {
		return nil
	}
	if topologyPolicy == topologymanager.PolicySingleNumaNode {
		return fmt.Errorf("Topolgy manager %s policy is incompatible with CPUManager %s policy option", topologymanager.PolicySingleNumaNode, OptionAlignBySocket)
	}
	if t.NumSockets > t.NumNUMANodes {
		return fmt.Errorf("Align by socket is not compatible with hardware where number of sockets are more than number of NUMA")
	}
	return nil
}

// takeByTopology is upstream's staticPolicy.takeByTopology: the
// algorithm and sorting the options choose.
func (o Options) takeByTopology(logger klog.Logger, t *Topology, available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	strategy := CPUSortingStrategyPacked
	if o.DistributeCPUsAcrossCores {
		strategy = CPUSortingStrategySpread
	}
	if o.DistributeCPUsAcrossNUMA {
		groupSize := 1
		if o.FullPhysicalCPUsOnly {
			groupSize = t.CPUsPerCore()
		}
		return takeByTopologyNUMADistributed(logger, t, available, n, groupSize, strategy, o.AlignBySocket)
	}
	return takeByTopologyNUMAPacked(logger, t, available, n, strategy, o.PreferAlignByUncoreCacheOption)
}

// SMTAlignmentError is upstream's: full-pcpus-only refuses a request that
// is not whole cores.
type SMTAlignmentError struct {
	RequestedCPUs         int
	CpusPerCore           int
	AvailablePhysicalCPUs int
	CausedByPhysicalCPUs  bool
}

// Type is the admission reason, as upstream's.
func (e SMTAlignmentError) Type() string { return "SMTAlignmentError" }

func (e SMTAlignmentError) Error() string {
	if e.CausedByPhysicalCPUs {
		return fmt.Sprintf("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d", e.AvailablePhysicalCPUs, e.RequestedCPUs, e.CpusPerCore)
	}
	return fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", e.RequestedCPUs, e.CpusPerCore)
}

// ReservedCPUs is the set the static policy keeps out of exclusive
// allocation: reservedSystemCPUs when given, else
// ceil(kubeReserved.cpu + systemReserved.cpu) CPUs taken by topology from
// the lowest cores as the options take CPUs (upstream's NewStaticPolicy).
func ReservedCPUs(t *Topology, o Options, explicit cpuset.CPUSet, reserved resource.Quantity) (cpuset.CPUSet, error) {
	if !explicit.IsEmpty() {
		if !explicit.IsSubsetOf(t.All()) {
			return cpuset.New(), fmt.Errorf("reservedSystemCPUs %q is not a subset of the machine's CPUs %q", explicit, t.All())
		}
		return explicit, nil
	}
	if reserved.IsZero() {
		return cpuset.New(), fmt.Errorf("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")
	}
	n := int((reserved.MilliValue() + 999) / 1000)
	set, err := o.takeByTopology(klog.Background(), t, t.All(), n)
	if err != nil || set.Size() != n {
		return cpuset.New(), fmt.Errorf("[cpumanager] unable to reserve the required amount of CPUs (size of %s did not equal %d)", set, n)
	}
	return set, nil
}

// guaranteedCPUs is the number of exclusive CPUs a container gets: its
// CPU request when the pod is Guaranteed and the request is an integer,
// else 0 (upstream's guaranteedCPUs).
func guaranteedCPUs(pod *v1.Pod, c *v1.Container) int {
	if podspec.QOSClass(pod) != v1.PodQOSGuaranteed {
		return 0
	}
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok || q.Value()*1000 != q.MilliValue() {
		return 0
	}
	return int(q.Value())
}

// podGuaranteedCPUs is the exclusive CPUs a pod needs at once (upstream's
// podGuaranteedCPUs): its app containers' and sidecars', or its largest
// init container's with the sidecars before it, whichever is more.
func podGuaranteedCPUs(pod *v1.Pod) int {
	var byInit, bySidecars, byApps int
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if _, ok := c.Resources.Requests[v1.ResourceCPU]; !ok {
			continue
		}
		n := guaranteedCPUs(pod, c)
		if podspec.IsSidecar(c) {
			bySidecars += n
		} else if bySidecars+n > byInit {
			byInit = bySidecars + n
		}
	}
	for i := range pod.Spec.Containers {
		byApps += guaranteedCPUs(pod, &pod.Spec.Containers[i])
	}
	return max(byApps+bySidecars, byInit)
}

// validateState is upstream's staticPolicy.validateState: a state read
// from the checkpoint must hold the reserved CPUs in its shared pool
// (none of them with strict-cpu-reservation), no exclusive CPU in it, and
// exactly the machine's CPUs overall.
func validateState(s *state, all, reserved cpuset.CPUSet, strict bool) error {
	if strict {
		all = all.Difference(reserved)
	}
	if s.defaultSet.IsEmpty() {
		if len(s.assignments) != 0 {
			return fmt.Errorf("default cpuset cannot be empty")
		}
		s.defaultSet = all
		return nil
	}
	if strict {
		if in := reserved.Intersection(s.defaultSet); !in.IsEmpty() {
			return fmt.Errorf("some of strictly reserved cpus: %q are present in defaultCpuSet: %q", in.String(), s.defaultSet.String())
		}
	} else if !reserved.Intersection(s.defaultSet).Equals(reserved) {
		return fmt.Errorf("not all reserved cpus: %q are present in defaultCpuSet: %q", reserved.String(), s.defaultSet.String())
	}
	for uid, cs := range s.assignments {
		for name, set := range cs {
			if !s.defaultSet.Intersection(set).IsEmpty() {
				return fmt.Errorf("pod: %s, container: %s cpuset: %q overlaps with default cpuset %q", uid, name, set.String(), s.defaultSet.String())
			}
		}
	}
	if known := s.defaultSet.Union(s.exclusive()); !known.Equals(all) {
		return fmt.Errorf("current set of available CPUs %q doesn't match with CPUs in state %q", all.String(), known.String())
	}
	return nil
}
