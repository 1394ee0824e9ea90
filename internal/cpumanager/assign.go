package cpumanager

// The CPU assignment algorithms of upstream's cpu_assignment.go (v1.37.2),
// same names and same decisions, so that upstream's table tests
// (assign_test.go) hold: takeByTopologyNUMAPacked (whole NUMA nodes and
// sockets, then uncore caches when preferred, then whole cores, then
// threads; packed or spread across cores) and
// takeByTopologyNUMADistributed (KEP-2902: CPUs spread evenly over the
// fewest NUMA nodes, by a balance score).

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"
)

// LoopControl says whether iterateCombinations goes on.
type LoopControl int

// The loop controls.
const (
	Continue LoopControl = iota
	Break
)

// CPUSortingStrategy orders free CPUs within a socket: packed (a core's
// threads together, the default) or spread (across cores first, the
// distribute-cpus-across-cores option).
type CPUSortingStrategy string

// The sorting strategies.
const (
	CPUSortingStrategyPacked CPUSortingStrategy = "packed"
	CPUSortingStrategySpread CPUSortingStrategy = "spread"
)

type mapIntInt map[int]int

func (m mapIntInt) values(keys ...int) []int {
	if keys == nil {
		keys = slices.Collect(maps.Keys(m))
	}
	out := make([]int, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func mean(xs []int) float64 {
	m := float64(sum(xs)) / float64(len(xs))
	return math.Round(m*1000) / 1000
}

func standardDeviation(xs []int) float64 {
	m := mean(xs)
	var s float64
	for _, x := range xs {
		s += (float64(x) - m) * (float64(x) - m)
	}
	return math.Round(math.Sqrt(s/float64(len(xs)))*1000) / 1000
}

// cpuAccumulator collects the CPUs of one allocation: details are the
// free CPUs left, result those taken.
type cpuAccumulator struct {
	logger        klog.Logger
	topo          *Topology
	details       CPUDetails
	numCPUsNeeded int
	result        cpuset.CPUSet
	// numaFirst: NUMA nodes hold whole sockets (sockets >= NUMA nodes),
	// so they are the first level; else sockets are.
	numaFirst bool
	strategy  CPUSortingStrategy
}

func newCPUAccumulator(logger klog.Logger, topo *Topology, availableCPUs cpuset.CPUSet, numCPUs int, strategy CPUSortingStrategy) *cpuAccumulator {
	return &cpuAccumulator{
		logger:        logger,
		topo:          topo,
		details:       topo.CPUDetails.KeepOnly(availableCPUs),
		numCPUsNeeded: numCPUs,
		result:        cpuset.New(),
		numaFirst:     topo.NumSockets >= topo.NumNUMANodes,
		strategy:      strategy,
	}
}

// sort orders ids by their free CPUs (fewest first), then by ID.
func (a *cpuAccumulator) sort(ids []int, getCPUs func(ids ...int) cpuset.CPUSet) {
	sort.Slice(ids, func(i, j int) bool {
		si, sj := getCPUs(ids[i]).Size(), getCPUs(ids[j]).Size()
		if si != sj {
			return si < sj
		}
		return ids[i] < ids[j]
	})
}

// within sorts the children (by children(parent)) of each parent in
// parents' order, by their free CPUs.
func (a *cpuAccumulator) within(parents []int, children func(...int) cpuset.CPUSet, cpus func(...int) cpuset.CPUSet) []int {
	var out []int
	for _, p := range parents {
		ids := children(p).UnsortedList()
		a.sort(ids, cpus)
		out = append(out, ids...)
	}
	return out
}

// sortAvailableNUMANodes: NUMA nodes with a free CPU, by free CPUs
// (within their sockets' order when sockets come first).
func (a *cpuAccumulator) sortAvailableNUMANodes() []int {
	if a.numaFirst {
		numas := a.details.NUMANodes().UnsortedList()
		a.sort(numas, a.details.CPUsInNUMANodes)
		return numas
	}
	return a.within(a.sortAvailableSockets(), a.details.NUMANodesInSockets, a.details.CPUsInNUMANodes)
}

// sortAvailableSockets: sockets with a free CPU, by free CPUs (within
// their NUMA nodes' order when NUMA nodes come first).
func (a *cpuAccumulator) sortAvailableSockets() []int {
	if a.numaFirst {
		return a.within(a.sortAvailableNUMANodes(), a.details.SocketsInNUMANodes, a.details.CPUsInSockets)
	}
	sockets := a.details.Sockets().UnsortedList()
	a.sort(sockets, a.details.CPUsInSockets)
	return sockets
}

// sortAvailableCores: cores with a free CPU, within the order of the
// lower of the two levels.
func (a *cpuAccumulator) sortAvailableCores() []int {
	if a.numaFirst {
		return a.within(a.sortAvailableSockets(), a.details.CoresInSockets, a.details.CPUsInCores)
	}
	return a.within(a.sortAvailableNUMANodes(), a.details.CoresInNUMANodes, a.details.CPUsInCores)
}

// sortAvailableUncoreCaches: uncore caches within the NUMA nodes' order.
func (a *cpuAccumulator) sortAvailableUncoreCaches() []int {
	return a.within(a.sortAvailableNUMANodes(), a.details.UncoreInNUMANodes, a.details.CPUsInUncoreCaches)
}

// sortAvailableCPUsPacked: free CPUs core by core in the cores' order.
func (a *cpuAccumulator) sortAvailableCPUsPacked() []int {
	var out []int
	for _, core := range a.sortAvailableCores() {
		out = append(out, a.details.CPUsInCores(core).List()...)
	}
	return out
}

// sortAvailableCPUsSpread: free CPUs socket by socket, by ID within one.
func (a *cpuAccumulator) sortAvailableCPUsSpread() []int {
	var out []int
	for _, socket := range a.sortAvailableSockets() {
		out = append(out, a.details.CPUsInSockets(socket).List()...)
	}
	return out
}

func (a *cpuAccumulator) freeCPUs() []int {
	if a.strategy == CPUSortingStrategyPacked {
		return a.sortAvailableCPUsPacked()
	}
	return a.sortAvailableCPUsSpread()
}

// free keeps the ids whose CPUs are all free.
func free(ids []int, isFree func(int) bool) []int {
	out := []int{}
	for _, id := range ids {
		if isFree(id) {
			out = append(out, id)
		}
	}
	return out
}

func (a *cpuAccumulator) isNUMANodeFree(id int) bool {
	return a.details.CPUsInNUMANodes(id).Size() == a.topo.CPUDetails.CPUsInNUMANodes(id).Size()
}
func (a *cpuAccumulator) isSocketFree(id int) bool {
	return a.details.CPUsInSockets(id).Size() == a.topo.CPUsPerSocket()
}
func (a *cpuAccumulator) isUncoreCacheFree(id int) bool {
	return a.details.CPUsInUncoreCaches(id).Size() == a.topo.CPUDetails.CPUsInUncoreCaches(id).Size()
}
func (a *cpuAccumulator) isCoreFree(id int) bool {
	return a.details.CPUsInCores(id).Size() == a.topo.CPUsPerCore()
}

func (a *cpuAccumulator) freeNUMANodes() []int {
	return free(a.sortAvailableNUMANodes(), a.isNUMANodeFree)
}
func (a *cpuAccumulator) freeSockets() []int { return free(a.sortAvailableSockets(), a.isSocketFree) }
func (a *cpuAccumulator) freeCores() []int   { return free(a.sortAvailableCores(), a.isCoreFree) }
func (a *cpuAccumulator) freeUncoreCache() []int {
	return free(a.sortAvailableUncoreCaches(), a.isUncoreCacheFree)
}

func (a *cpuAccumulator) take(cpus cpuset.CPUSet) {
	a.result = a.result.Union(cpus)
	a.details = a.details.KeepOnly(a.details.CPUs().Difference(a.result))
	a.numCPUsNeeded -= cpus.Size()
}

// takeFull takes each free group (in order) whose CPUs the allocation
// needs whole.
func (a *cpuAccumulator) takeFull(what string, groups []int, cpusIn func(...int) cpuset.CPUSet) {
	for _, g := range groups {
		cpus := cpusIn(g)
		if !a.needsAtLeast(cpus.Size()) {
			continue
		}
		a.logger.V(4).Info("Claiming a whole group of CPUs", "level", what, "id", g)
		a.take(cpus)
	}
}

func (a *cpuAccumulator) takeFullNUMANodes() {
	a.takeFull("numa", a.freeNUMANodes(), a.topo.CPUDetails.CPUsInNUMANodes)
}
func (a *cpuAccumulator) takeFullSockets() {
	a.takeFull("socket", a.freeSockets(), a.topo.CPUDetails.CPUsInSockets)
}
func (a *cpuAccumulator) takeFullUncore() {
	a.takeFull("uncore", a.freeUncoreCache(), a.topo.CPUDetails.CPUsInUncoreCaches)
}
func (a *cpuAccumulator) takeFullCores() {
	a.takeFull("core", a.freeCores(), a.topo.CPUDetails.CPUsInCores)
}

// takePartialUncore takes the rest of the allocation from one uncore
// cache when its free cores hold it (an odd request on SMT leaves one
// thread of the last core).
func (a *cpuAccumulator) takePartialUncore(uncoreID int) {
	perCore := a.topo.CPUsPerCore()
	numCoresNeeded := (a.numCPUsNeeded + perCore - 1) / perCore
	freeCores := a.details.CoresNeededInUncoreCache(numCoresNeeded, uncoreID)
	freeCPUs := a.details.CPUsInCores(freeCores.UnsortedList()...)
	if a.numCPUsNeeded%2 != 0 && perCore > 1 {
		sorted := freeCPUs.List()
		if len(sorted) > a.numCPUsNeeded {
			sorted = sorted[:freeCPUs.Size()-1]
		}
		freeCPUs = cpuset.New(sorted...)
	}
	claimed := a.numCPUsNeeded == freeCPUs.Size()
	a.logger.V(4).Info("Trying to claim a partial uncore cache", "uncore", uncoreID, "claimed", claimed,
		"needed", a.numCPUsNeeded, "cores", freeCores.String(), "cpus", freeCPUs.String())
	if claimed {
		a.take(freeCPUs)
	}
}

// takeUncoreCache takes whole uncore caches while the allocation needs
// one, then the rest from the first cache that holds it.
func (a *cpuAccumulator) takeUncoreCache() {
	perUncore := a.topo.CPUsPerUncore()
	for _, uncore := range a.sortAvailableUncoreCaches() {
		if a.needsAtLeast(perUncore) {
			a.takeFullUncore()
		}
		if a.isSatisfied() {
			return
		}
		a.takePartialUncore(uncore)
		if a.isSatisfied() {
			return
		}
	}
}

func (a *cpuAccumulator) takeRemainingCPUs() {
	for _, cpu := range a.freeCPUs() {
		a.logger.V(4).Info("Claiming a CPU", "cpu", cpu)
		a.take(cpuset.New(cpu))
		if a.isSatisfied() {
			return
		}
	}
}

// rangeNUMANodesNeededToSatisfy is the fewest and most NUMA nodes the
// allocation can take in groups of cpuGroupSize.
func (a *cpuAccumulator) rangeNUMANodesNeededToSatisfy(cpuGroupSize int) (minNumNUMAs, maxNumNUMAs int) {
	numNUMANodes := a.topo.CPUDetails.NUMANodes().Size()
	numNUMANodesAvailable := a.details.NUMANodes().Size()
	numCPUGroups := (a.topo.CPUDetails.CPUs().Size()-1)/cpuGroupSize + 1
	numCPUGroupsPerNUMANode := (numCPUGroups-1)/numNUMANodes + 1
	numCPUGroupsNeeded := (a.numCPUsNeeded-1)/cpuGroupSize + 1
	minNumNUMAs = (numCPUGroupsNeeded-1)/numCPUGroupsPerNUMANode + 1
	maxNumNUMAs = min(numCPUGroupsNeeded, numNUMANodesAvailable)
	return minNumNUMAs, maxNumNUMAs
}

func (a *cpuAccumulator) needsAtLeast(n int) bool { return a.numCPUsNeeded >= n }
func (a *cpuAccumulator) isSatisfied() bool       { return a.numCPUsNeeded < 1 }
func (a *cpuAccumulator) isFailed() bool          { return a.numCPUsNeeded > a.details.CPUs().Size() }

// iterateCombinations calls f on every k-subset of n, in order, until f
// says Break.
func (a *cpuAccumulator) iterateCombinations(n []int, k int, f func([]int) LoopControl) {
	if k < 1 {
		return
	}
	var helper func(k, start int, accum []int) LoopControl
	helper = func(k, start int, accum []int) LoopControl {
		if k == 0 {
			return f(accum)
		}
		for i := start; i <= len(n)-k; i++ {
			if helper(k-1, i+1, append(accum, n[i])) == Break {
				return Break
			}
		}
		return Continue
	}
	helper(k, 0, []int{})
}

// takeByTopologyNUMAPacked takes numCPUs of availableCPUs: whole NUMA
// nodes and sockets (the higher level first) while a whole one is
// needed, then (preferAlignByUncoreCache) whole uncore caches and the
// rest within one, then whole cores (not with the spread strategy), then
// single CPUs; always from the groups with the fewest free CPUs first.
func takeByTopologyNUMAPacked(logger klog.Logger, topo *Topology, availableCPUs cpuset.CPUSet, numCPUs int, strategy CPUSortingStrategy, preferAlignByUncoreCache bool) (cpuset.CPUSet, error) {
	acc := newCPUAccumulator(logger, topo, availableCPUs, numCPUs, strategy)
	if acc.isSatisfied() {
		return acc.result, nil
	}
	if acc.isFailed() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", numCPUs, availableCPUs.Size())
	}
	steps := []func(){acc.takeFullSockets, acc.takeFullNUMANodes}
	if acc.numaFirst {
		steps = []func(){acc.takeFullNUMANodes, acc.takeFullSockets}
	}
	if preferAlignByUncoreCache {
		steps = append(steps, acc.takeUncoreCache)
	}
	if strategy != CPUSortingStrategySpread {
		steps = append(steps, acc.takeFullCores)
	}
	steps = append(steps, acc.takeRemainingCPUs)
	for _, step := range steps {
		step()
		if acc.isSatisfied() {
			return acc.result, nil
		}
	}
	return cpuset.New(), fmt.Errorf("failed to allocate cpus")
}

// takeByTopologyNUMADistributed takes numCPUs of availableCPUs in groups
// of cpuGroupSize spread evenly over the fewest NUMA nodes that can hold
// them (KEP-2902): for k = the fewest possible NUMA nodes upward, the
// k-combination with the best balance score (the standard deviation of
// the free CPUs left per NUMA node, the remainder placed where it scores
// best; with alignBySocket a combination within one socket wins); each
// NUMA node's share taken packed. It falls back to the packed algorithm
// when numCPUs is not a multiple of cpuGroupSize or no combination fits.
func takeByTopologyNUMADistributed(logger klog.Logger, topo *Topology, availableCPUs cpuset.CPUSet, numCPUs int, cpuGroupSize int, strategy CPUSortingStrategy, alignBySocket bool) (cpuset.CPUSet, error) {
	if numCPUs%cpuGroupSize != 0 {
		return takeByTopologyNUMAPacked(logger, topo, availableCPUs, numCPUs, strategy, false)
	}
	acc := newCPUAccumulator(logger, topo, availableCPUs, numCPUs, strategy)
	if acc.isSatisfied() {
		return acc.result, nil
	}
	if acc.isFailed() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", numCPUs, availableCPUs.Size())
	}
	numas := acc.sortAvailableNUMANodes()
	minNUMAs, maxNUMAs := acc.rangeNUMANodesNeededToSatisfy(cpuGroupSize)
	for k := minNUMAs; k <= maxNUMAs; k++ {
		bestBalance := math.MaxFloat64
		var bestRemainder, bestCombo []int
		bestInOneSocket := false
		acc.iterateCombinations(numas, k, func(combo []int) LoopControl {
			if bestBalance == 0 && (!alignBySocket || bestInOneSocket) {
				return Break
			}
			balance, remainderSubset, ok := acc.balance(numas, combo, numCPUs, cpuGroupSize, alignBySocket)
			if !ok {
				return Continue
			}
			inSameSocket := alignBySocket && topo.CPUDetails.AreNUMANodesInSameSocket(combo)
			isBetter := balance < bestBalance
			if alignBySocket && inSameSocket != bestInOneSocket {
				isBetter = inSameSocket
			}
			if isBetter {
				bestBalance, bestRemainder, bestCombo = balance, remainderSubset, combo
				bestInOneSocket = inSameSocket
			}
			return Continue
		})
		if bestCombo == nil {
			continue
		}
		distribution := (numCPUs / len(bestCombo) / cpuGroupSize) * cpuGroupSize
		for _, numa := range bestCombo {
			distribution = min(distribution, acc.details.CPUsInNUMANodes(numa).Size()/cpuGroupSize*cpuGroupSize)
		}
		for _, numa := range bestCombo {
			cpus, _ := takeByTopologyNUMAPacked(logger, acc.topo, acc.details.CPUsInNUMANodes(numa), distribution, strategy, false)
			acc.take(cpus)
		}
		remainder := numCPUs - distribution*len(bestCombo)
		for remainder > 0 {
			for _, numa := range bestRemainder {
				if remainder == 0 {
					break
				}
				if acc.details.CPUsInNUMANodes(numa).Size() < cpuGroupSize {
					continue
				}
				cpus, _ := takeByTopologyNUMAPacked(logger, acc.topo, acc.details.CPUsInNUMANodes(numa), cpuGroupSize, strategy, false)
				acc.take(cpus)
				remainder -= cpuGroupSize
			}
		}
		if acc.numCPUsNeeded > 0 {
			return cpuset.New(), fmt.Errorf("accounting error, not enough CPUs allocated, remaining: %v", acc.numCPUsNeeded)
		}
		if acc.numCPUsNeeded < 0 {
			return cpuset.New(), fmt.Errorf("accounting error, too many CPUs allocated, remaining: %v", acc.numCPUsNeeded)
		}
		return acc.result, nil
	}
	return takeByTopologyNUMAPacked(logger, topo, availableCPUs, numCPUs, strategy, false)
}

// balance scores distributing numCPUs over combo (of numas): false when
// combo cannot hold them in groups of cpuGroupSize evenly; else the best
// balance score and the subset of combo the remainder goes to.
func (a *cpuAccumulator) balance(numas, combo []int, numCPUs, cpuGroupSize int, alignBySocket bool) (float64, []int, bool) {
	if a.details.CPUsInNUMANodes(combo...).Size() < numCPUs {
		return 0, nil, false
	}
	groups := 0
	for _, numa := range combo {
		groups += a.details.CPUsInNUMANodes(numa).Size() / cpuGroupSize
	}
	if groups*cpuGroupSize < numCPUs {
		return 0, nil, false
	}
	distribution := (numCPUs / len(combo) / cpuGroupSize) * cpuGroupSize
	if alignBySocket {
		for _, numa := range combo {
			distribution = min(distribution, a.details.CPUsInNUMANodes(numa).Size()/cpuGroupSize*cpuGroupSize)
		}
	}
	for _, numa := range combo {
		if a.details.CPUsInNUMANodes(numa).Size() < distribution {
			return 0, nil, false
		}
	}
	after := make(mapIntInt, len(numas))
	for _, numa := range numas {
		after[numa] = a.details.CPUsInNUMANodes(numa).Size()
	}
	for _, numa := range combo {
		after[numa] -= distribution
	}
	remainder := numCPUs - distribution*len(combo)
	var remainderCombo []int
	for _, numa := range combo {
		if after[numa] >= cpuGroupSize {
			remainderCombo = append(remainderCombo, numa)
		}
	}
	best := math.MaxFloat64
	var bestSubset []int
	if remainder == 0 {
		best = standardDeviation(after.values())
	}
	for k := len(remainderCombo); remainder > 0 && k >= 1; k-- {
		a.iterateCombinations(remainderCombo, k, func(subset []int) LoopControl {
			left := remainder
			after := maps.Clone(after)
			if sum(after.values(subset...)) < left {
				return Continue
			}
			for left > 0 {
				for _, numa := range subset {
					if left == 0 {
						break
					}
					if after[numa] < cpuGroupSize {
						continue
					}
					after[numa] -= cpuGroupSize
					left -= cpuGroupSize
				}
			}
			if b := standardDeviation(after.values()); b < best {
				best, bestSubset = b, subset
			}
			return Continue
		})
	}
	return best, bestSubset, true
}
