package topologymanager

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/bitmask"
)

// The policies, upstream's names.
const (
	PolicyNone           = "none"
	PolicyBestEffort     = "best-effort"
	PolicyRestricted     = "restricted"
	PolicySingleNumaNode = "single-numa-node"
)

// Policy merges the providers' hints into the best one and says whether
// the pod may be admitted with it.
type Policy interface {
	Name() string
	Merge(ctx context.Context, providersHints []map[string][]TopologyHint) (TopologyHint, bool)
}

// IsAlignmentGuaranteed: only single-numa-node guarantees alignment.
func IsAlignmentGuaranteed(p Policy) bool { return p.Name() == PolicySingleNumaNode }

// NewPolicy is the policy named name on numaInfo ("none": nonePolicy).
func NewPolicy(name string, numaInfo *NUMAInfo, opts PolicyOptions) (Policy, bool) {
	switch name {
	case PolicyNone:
		return nonePolicy{}, true
	case PolicyBestEffort:
		return &bestEffortPolicy{numaInfo: numaInfo, opts: opts}, true
	case PolicyRestricted:
		return &restrictedPolicy{bestEffortPolicy{numaInfo: numaInfo, opts: opts}}, true
	case PolicySingleNumaNode:
		return &singleNumaNodePolicy{numaInfo: numaInfo, opts: opts}, true
	}
	return nil, false
}

type nonePolicy struct{}

func (nonePolicy) Name() string { return PolicyNone }
func (nonePolicy) Merge(context.Context, []map[string][]TopologyHint) (TopologyHint, bool) {
	return TopologyHint{}, true
}

type bestEffortPolicy struct {
	numaInfo *NUMAInfo
	opts     PolicyOptions
}

func (p *bestEffortPolicy) Name() string { return PolicyBestEffort }

func (p *bestEffortPolicy) Merge(ctx context.Context, providersHints []map[string][]TopologyHint) (TopologyHint, bool) {
	filtered := filterProvidersHints(ctx, providersHints)
	return NewHintMerger(p.numaInfo, filtered, p.Name(), p.opts).Merge(), true
}

type restrictedPolicy struct{ bestEffortPolicy }

func (p *restrictedPolicy) Name() string { return PolicyRestricted }

func (p *restrictedPolicy) Merge(ctx context.Context, providersHints []map[string][]TopologyHint) (TopologyHint, bool) {
	filtered := filterProvidersHints(ctx, providersHints)
	best := NewHintMerger(p.numaInfo, filtered, p.Name(), p.opts).Merge()
	return best, best.Preferred
}

type singleNumaNodePolicy struct {
	numaInfo *NUMAInfo
	opts     PolicyOptions
}

func (p *singleNumaNodePolicy) Name() string { return PolicySingleNumaNode }

// filterSingleNumaHints keeps the preferred hints of one node or none.
func filterSingleNumaHints(all [][]TopologyHint) [][]TopologyHint {
	var out [][]TopologyHint
	for _, hints := range all {
		var kept []TopologyHint
		for _, h := range hints {
			if h.Preferred && (h.NUMANodeAffinity == 0 || h.NUMANodeAffinity.Count() == 1) {
				kept = append(kept, h)
			}
		}
		out = append(out, kept)
	}
	return out
}

func (p *singleNumaNodePolicy) Merge(ctx context.Context, providersHints []map[string][]TopologyHint) (TopologyHint, bool) {
	filtered := filterSingleNumaHints(filterProvidersHints(ctx, providersHints))
	best := NewHintMerger(p.numaInfo, filtered, p.Name(), p.opts).Merge()
	if best.NUMANodeAffinity == p.numaInfo.DefaultAffinityMask() {
		best = TopologyHint{0, best.Preferred}
	}
	return best, best.Preferred
}

// mergePermutation ANDs one hint of each provider: preferred when all
// are and their affinities agree.
func mergePermutation(defaultAffinity bitmask.Mask, permutation []TopologyHint) TopologyHint {
	preferred := true
	merged := defaultAffinity
	var first bitmask.Mask
	seen := false
	for _, h := range permutation {
		if h.NUMANodeAffinity != 0 {
			if !seen {
				first, seen = h.NUMANodeAffinity, true
			} else if h.NUMANodeAffinity != first {
				preferred = false
			}
			merged &= h.NUMANodeAffinity
		}
		if !h.Preferred {
			preferred = false
		}
	}
	return TopologyHint{merged, preferred}
}

// filterProvidersHints is upstream's: a provider without hints, or with
// a nil list for a resource, has no preference ({nil, true}); an empty
// list for a resource means it cannot be satisfied ({nil, false}).
func filterProvidersHints(ctx context.Context, providersHints []map[string][]TopologyHint) [][]TopologyHint {
	logger := klog.FromContext(ctx)
	var all [][]TopologyHint
	for _, hints := range providersHints {
		if len(hints) == 0 {
			logger.V(4).Info("Hint Provider has no preference for NUMA affinity with any resource")
			all = append(all, []TopologyHint{{0, true}})
			continue
		}
		for resource, rh := range hints {
			switch {
			case rh == nil:
				logger.V(4).Info("Hint Provider has no preference for NUMA affinity with resource", "resource", resource)
				all = append(all, []TopologyHint{{0, true}})
			case len(rh) == 0:
				logger.V(4).Info("Hint Provider has no possible NUMA affinities for resource", "resource", resource)
				all = append(all, []TopologyHint{{0, false}})
			default:
				all = append(all, rh)
			}
		}
	}
	return all
}

func narrowestHint(hints []TopologyHint) *TopologyHint {
	var narrowest *TopologyHint
	for i := range hints {
		if hints[i].NUMANodeAffinity == 0 {
			continue
		}
		if narrowest == nil || hints[i].NUMANodeAffinity.IsNarrowerThan(narrowest.NUMANodeAffinity) {
			narrowest = &hints[i]
		}
	}
	return narrowest
}

func maxOfMinAffinityCounts(filteredHints [][]TopologyHint) int {
	max := 0
	for _, hints := range filteredHints {
		if n := narrowestHint(hints); n != nil && n.NUMANodeAffinity.Count() > max {
			max = n.NUMANodeAffinity.Count()
		}
	}
	return max
}

// HintMerger is upstream's: it walks every permutation of one hint per
// provider and resource, keeping the best merged hint.
type HintMerger struct {
	NUMAInfo                      *NUMAInfo
	Hints                         [][]TopologyHint
	BestNonPreferredAffinityCount int
	CompareNUMAAffinityMasks      func(current, candidate *TopologyHint) *TopologyHint
}

// NewHintMerger compares masks by distance under prefer-closest-numa-nodes
// (except single-numa-node), else by width.
func NewHintMerger(numaInfo *NUMAInfo, hints [][]TopologyHint, policyName string, opts PolicyOptions) HintMerger {
	compare := func(current, candidate *TopologyHint) *TopologyHint {
		if candidate.NUMANodeAffinity == current.NUMANodeAffinity {
			return current
		}
		var best bitmask.Mask
		if policyName != PolicySingleNumaNode && opts.PreferClosestNUMA {
			best = numaInfo.Closest(current.NUMANodeAffinity, candidate.NUMANodeAffinity)
		} else {
			best = numaInfo.Narrowest(current.NUMANodeAffinity, candidate.NUMANodeAffinity)
		}
		if best == current.NUMANodeAffinity {
			return current
		}
		return candidate
	}
	return HintMerger{NUMAInfo: numaInfo, Hints: hints, BestNonPreferredAffinityCount: maxOfMinAffinityCounts(hints), CompareNUMAAffinityMasks: compare}
}

func (m HintMerger) compare(current, candidate *TopologyHint) *TopologyHint {
	switch {
	case candidate.NUMANodeAffinity.Count() == 0:
		return current
	case current == nil:
		return candidate
	case !current.Preferred && candidate.Preferred:
		return candidate
	case current.Preferred && !candidate.Preferred:
		return current
	case current.Preferred && candidate.Preferred:
		return m.CompareNUMAAffinityMasks(current, candidate)
	}
	// Both non-preferred: the closest to the widest of the narrowest
	// hints of each provider (upstream's bestNonPreferredAffinityCount).
	cur, cand, best := current.NUMANodeAffinity.Count(), candidate.NUMANodeAffinity.Count(), m.BestNonPreferredAffinityCount
	switch {
	case cur > best:
		return m.CompareNUMAAffinityMasks(current, candidate)
	case cur == best:
		if cand != best {
			return current
		}
		return m.CompareNUMAAffinityMasks(current, candidate)
	case cand > best:
		return current
	case cand == best:
		return candidate
	case cand > cur:
		return candidate
	case cand < cur:
		return current
	}
	return m.CompareNUMAAffinityMasks(current, candidate)
}

// Merge is the best merged hint ({every node, false} when none).
func (m HintMerger) Merge() TopologyHint {
	def := m.NUMAInfo.DefaultAffinityMask()
	var best *TopologyHint
	iterateAllProviderTopologyHints(m.Hints, func(permutation []TopologyHint) {
		merged := mergePermutation(def, permutation)
		best = m.compare(best, &merged)
	})
	if best == nil {
		return TopologyHint{def, false}
	}
	return *best
}

func iterateAllProviderTopologyHints(all [][]TopologyHint, callback func([]TopologyHint)) {
	var iterate func(i int, accum []TopologyHint)
	iterate = func(i int, accum []TopologyHint) {
		if i == len(all) {
			callback(accum)
			return
		}
		for j := range all[i] {
			iterate(i+1, append(accum, all[i][j]))
		}
	}
	iterate(0, []TopologyHint{})
}
