package cpumanager

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"
)

// takeByTopology picks n CPUs out of available, as upstream's
// takeByTopologyNUMAPacked with the packed sorting: whole NUMA nodes and
// sockets first (the bigger of the two levels first) when n needs at
// least one, then whole cores, then single threads, always from the
// groups with the fewest free CPUs (packing), lowest IDs first on ties.
func takeByTopology(t *Topology, available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	a := &accumulator{t: t, free: available.Intersection(t.All()), need: n, result: cpuset.New()}
	if a.need < 1 {
		return a.result, nil
	}
	if a.need > a.free.Size() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", n, available.Size())
	}
	// Upstream's numaFirst when sockets >= NUMA nodes (a NUMA node holds
	// whole sockets), else socketsFirst.
	l1, l2 := numaOf, socketOf
	if t.NumSockets() < t.NumNUMANodes() {
		l1, l2 = socketOf, numaOf
	}
	a.levels = []func(CPUInfo) int{l1, l2, coreOf}
	for _, level := range a.levels {
		a.takeFull(level)
		if a.need < 1 {
			return a.result, nil
		}
	}
	for _, id := range a.order() {
		a.take(cpuset.New(id))
		if a.need < 1 {
			return a.result, nil
		}
	}
	return cpuset.New(), fmt.Errorf("failed to allocate cpus")
}

type accumulator struct {
	t      *Topology
	levels []func(CPUInfo) int
	free   cpuset.CPUSet
	result cpuset.CPUSet
	need   int
}

func (a *accumulator) take(cpus cpuset.CPUSet) {
	a.result = a.result.Union(cpus)
	a.free = a.free.Difference(cpus)
	a.need -= cpus.Size()
}

// order sorts the free CPUs as upstream's sortAvailableCPUsPacked: by the
// free CPUs of their first-level group, that group's ID, the same for the
// second level and the core, then by CPU ID.
func (a *accumulator) order() []int {
	freeIn := map[int]map[int]int{} // level index -> group -> free CPUs
	for i, level := range a.levels {
		freeIn[i] = map[int]int{}
		for _, id := range a.free.UnsortedList() {
			freeIn[i][level(a.t.CPUs[id])]++
		}
	}
	ids := a.free.List()
	slices.SortStableFunc(ids, func(x, y int) int {
		cx, cy := a.t.CPUs[x], a.t.CPUs[y]
		for i, level := range a.levels {
			if c := cmp.Compare(freeIn[i][level(cx)], freeIn[i][level(cy)]); c != 0 {
				return c
			}
			if c := cmp.Compare(level(cx), level(cy)); c != 0 {
				return c
			}
		}
		return cmp.Compare(x, y)
	})
	return ids
}

// takeFull takes whole groups of level (NUMA nodes, sockets or cores)
// that are entirely free, in the packed order, while n needs a whole one.
func (a *accumulator) takeFull(level func(CPUInfo) int) {
	var groups []int
	for _, id := range a.order() {
		if g := level(a.t.CPUs[id]); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		all := a.t.where(a.t.All(), level, g)
		if a.t.where(a.free, level, g).Size() != all.Size() || a.need < all.Size() {
			continue
		}
		a.take(all)
	}
}
