package cpumanager

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/podspec"
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

// Options are the static policy's options nodelet implements.
type Options struct {
	// FullPCPUsOnly: exclusive CPUs are whole cores only (SMTAlignmentError
	// otherwise).
	FullPCPUsOnly bool
	// StrictCPUReservation: the reserved CPUs are out of the shared pool
	// too (only system daemons run there).
	StrictCPUReservation bool
}

// ParseOptions reads cpuManagerPolicyOptions for policy. An unknown option,
// or an alpha or beta one without its gate (CPUManagerPolicyAlphaOptions,
// CPUManagerPolicyBetaOptions), is an error as upstream's; an option
// nodelet does not implement, set to true, is refused by name (never
// accepted and ignored).
func ParseOptions(policy string, opts map[string]string, alphaGate, betaGate bool) (Options, error) {
	var o Options
	if len(opts) > 0 && policy != PolicyStatic {
		return o, fmt.Errorf("cpuManagerPolicyOptions %v: options are only valid with the static policy (cpuManagerPolicy is %q)", opts, policy)
	}
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		switch {
		case (name == OptionAlignBySocket || name == OptionDistributeAcrossCores) && !alphaGate:
			return o, fmt.Errorf("CPU Manager Policy Alpha-level Options not enabled, but option %q provided", name)
		case name == OptionDistributeCPUsAcrossNUMA && !betaGate:
			return o, fmt.Errorf("CPU Manager Policy Beta-level Options not enabled, but option %q provided", name)
		}
		v, err := strconv.ParseBool(opts[name])
		if err != nil {
			return o, fmt.Errorf("cpuManagerPolicyOptions: bad value for option %q: %w", name, err)
		}
		switch name {
		case OptionFullPCPUsOnly:
			o.FullPCPUsOnly = v
		case OptionStrictCPUReservation:
			o.StrictCPUReservation = v
		case OptionDistributeCPUsAcrossNUMA, OptionAlignBySocket, OptionDistributeAcrossCores, OptionPreferAlignByUncoreCache:
			if v {
				return o, fmt.Errorf("cpuManagerPolicyOptions: option %q is not implemented by nodelet (implemented: %s, %s)", name, OptionFullPCPUsOnly, OptionStrictCPUReservation)
			}
		default:
			return o, fmt.Errorf("unknown CPU Manager Policy option: %q", name)
		}
	}
	return o, nil
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
// the lowest cores (upstream's NewStaticPolicy).
func ReservedCPUs(t *Topology, explicit cpuset.CPUSet, reserved resource.Quantity) (cpuset.CPUSet, error) {
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
	set, err := takeByTopology(t, t.All(), n)
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
