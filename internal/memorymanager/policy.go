package memorymanager

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/memorymanager/state"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// The policies, upstream's names.
const (
	PolicyNone   = "None"
	PolicyStatic = "Static"
)

// hint is a NUMA affinity for memory (upstream's TopologyHint); a zero
// affinity is none.
type hint = topologymanager.TopologyHint

// reservedMemory is reservedMemory by NUMA node and memory type, in bytes.
type reservedMemory map[int]map[v1.ResourceName]uint64

// requests is a container's memory and huge pages requests, in bytes.
type requests map[v1.ResourceName]uint64

func (r requests) types() []v1.ResourceName { return slices.Sorted(maps.Keys(r)) }

// isMemoryType: memory and hugepages-<size>.
func isMemoryType(name v1.ResourceName) bool {
	return name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// containerRequests is upstream's getContainerRequestedResources.
func containerRequests(c *v1.Container) (requests, error) {
	out := requests{}
	for name, q := range c.Resources.Requests {
		if !isMemoryType(name) {
			continue
		}
		v, ok := q.AsInt64()
		if !ok {
			return nil, errors.New("[memorymanager] failed to represent quantity as int64")
		}
		out[name] = uint64(v)
	}
	return out, nil
}

// podRequests is upstream's getPodRequestedResources: per type, the
// app containers' and sidecars' requests, or the largest init
// container's with the sidecars before it, whichever is more.
func podRequests(pod *v1.Pod) (requests, error) {
	byInit, bySidecars, byApps := requests{}, requests{}, requests{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req, err := containerRequests(c)
		if err != nil {
			return nil, err
		}
		for name, size := range req {
			if podspec.IsSidecar(c) {
				bySidecars[name] += size
			} else if bySidecars[name]+size > byInit[name] {
				byInit[name] = bySidecars[name] + size
			}
		}
	}
	for i := range pod.Spec.Containers {
		req, err := containerRequests(&pod.Spec.Containers[i])
		if err != nil {
			return nil, err
		}
		for name, size := range req {
			byApps[name] += size
		}
	}
	out := requests{}
	for name, size := range byApps {
		out[name] = max(size+bySidecars[name], byInit[name])
	}
	return out, nil
}

// regenerateHints is upstream's: memory already allocated gives back its
// own affinity as the only, preferred, hint; none when it no longer
// matches the request.
func regenerateHints(blocks []state.Block, req requests) map[string][]topologymanager.TopologyHint {
	out := map[string][]topologymanager.TopologyHint{}
	for name := range req {
		out[string(name)] = []topologymanager.TopologyHint{}
	}
	if len(blocks) != len(req) {
		return nil
	}
	for _, b := range blocks {
		if size, ok := req[b.Type]; !ok || size != b.Size {
			return nil
		}
		mask, err := bitmask.New(b.NUMAAffinity...)
		if err != nil {
			return nil
		}
		out[string(b.Type)] = append(out[string(b.Type)], topologymanager.TopologyHint{NUMANodeAffinity: mask, Preferred: true})
	}
	return out
}

// byName keys hints by the resource's name, as the topology manager
// takes them.
func byName(hints map[v1.ResourceName][]hint) map[string][]topologymanager.TopologyHint {
	out := map[string][]topologymanager.TopologyHint{}
	for name, hs := range hints {
		out[string(name)] = hs
	}
	return out
}

// pinned tells whether the static policy pins a pod's memory: Guaranteed
// and without pod-level resources (upstream pins those only with the
// alpha PodLevelResourceManagers gate, which nodelet refuses).
func pinned(pod *v1.Pod) bool {
	return podspec.QOSClass(pod) == v1.PodQOSGuaranteed && !resourcehelper.IsPodLevelResourcesSet(pod)
}

// defaultMachineState is the machine with no assignment: per node and
// type, the total, the reserved and the rest allocatable and free; huge
// pages are not regular memory.
func defaultMachineState(nodes []NUMANode, reserved reservedMemory) state.NUMANodeMap {
	ms := state.NUMANodeMap{}
	for _, n := range nodes {
		ns := &state.NUMANodeState{MemoryMap: map[v1.ResourceName]*state.MemoryTable{}, Cells: []int{n.ID}}
		var huge uint64
		for _, hp := range n.HugePages {
			name := machine.HugePageResourceName(int64(hp.PageSize * 1024))
			total := hp.Pages * hp.PageSize * 1024
			r := reserved[n.ID][name]
			ns.MemoryMap[name] = &state.MemoryTable{TotalMemSize: total, SystemReserved: r, Allocatable: total - r, Free: total - r}
			huge += total
		}
		r := reserved[n.ID][v1.ResourceMemory]
		alloc := n.Memory - r - huge
		ns.MemoryMap[v1.ResourceMemory] = &state.MemoryTable{TotalMemSize: n.Memory, SystemReserved: r, Allocatable: alloc, Free: alloc}
		ms[n.ID] = ns
	}
	return ms
}

// table is a node's table of a type (nil when the node has none).
func table(ms state.NUMANodeMap, id int, name v1.ResourceName) *state.MemoryTable {
	if ns := ms[id]; ns != nil {
		return ns.MemoryMap[name]
	}
	return nil
}

func sameGroup(a, b []int) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// static is the Static policy's memory of what a pod's init containers
// leave for the containers after them (upstream's
// initContainersReusableMemory, kept for the pod being admitted only).
type static struct {
	reusable map[string]map[bitmask.Mask]map[v1.ResourceName]uint64
}

func (p *static) reusableOf(uid string, mask bitmask.Mask, name v1.ResourceName) uint64 {
	return p.reusable[uid][mask][name]
}

// calculateHints is upstream's: every group of nodes with enough
// allocatable memory of each type, not mixing single-node and multi-node
// allocations nor different groups, with enough free memory (the pod's
// reusable included); the narrowest are preferred.
func (p *static) calculateHints(ms state.NUMANodeMap, uid string, req requests) map[v1.ResourceName][]hint {
	ids := slices.Sorted(maps.Keys(ms))
	minSize := len(ids)
	hints := map[v1.ResourceName][]hint{}
	bitmask.Iterate(ids, func(mask bitmask.Mask) {
		bits := mask.Bits()
		single := len(bits) == 1
		free, alloc := map[v1.ResourceName]uint64{}, map[v1.ResourceName]uint64{}
		for _, id := range bits {
			for name := range req {
				if t := table(ms, id, name); t != nil {
					free[name] += t.Free
					alloc[name] += t.Allocatable
				}
			}
		}
		for name, size := range req {
			if alloc[name] < size {
				return
			}
		}
		if mask.Count() < minSize {
			minSize = mask.Count()
		}
		if single && len(ms[bits[0]].Cells) > 1 {
			return // grouped with other nodes: no single-node allocation
		}
		for _, id := range bits {
			if !single && ms[id].NumberOfAssignments > 0 {
				if len(ms[id].Cells) == 1 || !sameGroup(ms[id].Cells, bits) {
					return
				}
			}
		}
		for name, size := range req {
			if free[name]+p.reusableOf(uid, mask, name) < size {
				return
			}
		}
		for name := range req {
			hints[name] = append(hints[name], hint{NUMANodeAffinity: mask})
		}
	})
	for name := range req {
		for i := range hints[name] {
			hints[name][i].Preferred = hints[name][i].NUMANodeAffinity.Count() == minSize
		}
	}
	return hints
}

// bestHint is upstream's findBestHint: preferred first, then the
// narrowest.
func bestHint(hints []hint) hint {
	var best hint
	for _, h := range hints {
		switch {
		case best.NUMANodeAffinity == 0:
			best = h
		case h.Preferred && !best.Preferred:
			best = h
		case h.Preferred == best.Preferred && h.NUMANodeAffinity.IsNarrowerThan(best.NUMANodeAffinity):
			best = h
		}
	}
	return best
}

// satisfies tells whether the nodes of mask have the free memory req asks.
func satisfies(ms state.NUMANodeMap, mask bitmask.Mask, req requests) bool {
	free := map[v1.ResourceName]uint64{}
	for _, id := range mask.Bits() {
		for name := range req {
			if t := table(ms, id, name); t != nil {
				free[name] += t.Free
			}
		}
	}
	for name, size := range req {
		if free[name] < size {
			return false
		}
	}
	return true
}

// violates is upstream's isAffinityViolatingNUMAAllocations: a node used
// alone cannot join a group, nor a node of another group.
func violates(ms state.NUMANodeMap, mask bitmask.Mask) bool {
	bits := mask.Bits()
	if len(bits) == 1 {
		return false
	}
	for _, id := range bits {
		ns := ms[id]
		if ns == nil || ns.NumberOfAssignments == 0 {
			continue
		}
		if len(ns.Cells) == 1 || !sameGroup(ns.Cells, bits) {
			return true
		}
	}
	return false
}

// affinity is the NUMA nodes a container's memory comes from, as
// upstream's static Allocate picks them: the topology manager's hint, or
// without one the default hint (the fewest nodes that can hold the
// request), extended to nodes that can hold it when it cannot; never a
// group that mixes single-node and multi-node allocations.
func (p *static) affinity(ms state.NUMANodeMap, uid string, req requests, tm hint) (hint, error) {
	best := tm
	if best.NUMANodeAffinity == 0 {
		hints := p.calculateHints(ms, uid, req)
		if len(hints) < 1 {
			return hint{}, errors.New("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")
		}
		def := bestHint(hints[v1.ResourceMemory])
		if !def.Preferred && best.Preferred {
			return hint{}, errors.New("[memorymanager] failed to find the default preferred hint")
		}
		best = def
	}
	if !satisfies(ms, best.NUMANodeAffinity, req) {
		var within []hint
		for _, h := range p.calculateHints(ms, uid, req)[v1.ResourceMemory] {
			if h.NUMANodeAffinity&best.NUMANodeAffinity == best.NUMANodeAffinity {
				within = append(within, h)
			}
		}
		if len(within) < 1 {
			return hint{}, errors.New("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
		}
		ext := bestHint(within)
		if !ext.Preferred && best.Preferred {
			return hint{}, errors.New("[memorymanager] failed to find the extended preferred hint")
		}
		best = ext
	}
	if best.NUMANodeAffinity == 0 {
		return hint{}, errors.New("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")
	}
	if violates(ms, best.NUMANodeAffinity) {
		return hint{}, errors.New("[memorymanager] preferred hint violates NUMA node allocation")
	}
	return best, nil
}

// reserve takes size bytes of a type from the nodes of bits in order
// (upstream's updateMachineState); every node counts one more assignment
// and joins the group.
func reserve(ms state.NUMANodeMap, bits []int, name v1.ResourceName, size uint64) {
	for _, id := range bits {
		ms[id].NumberOfAssignments++
		ms[id].Cells = bits
		t := ms[id].MemoryMap[name]
		if size == 0 || t == nil || t.Free == 0 {
			continue
		}
		take := min(size, t.Free)
		t.Reserved += take
		t.Free -= take
		size -= take
	}
}

// release gives blocks back to their nodes (upstream's releaseMemory).
func release(ms state.NUMANodeMap, blocks []state.Block) {
	for _, b := range blocks {
		size := b.Size
		for _, id := range b.NUMAAffinity {
			ns := ms[id]
			if ns == nil {
				continue
			}
			ns.NumberOfAssignments--
			if ns.NumberOfAssignments == 0 {
				ns.Cells = []int{id}
			}
			t := ns.MemoryMap[b.Type]
			if size == 0 || t == nil || t.Reserved == 0 {
				continue
			}
			back := min(size, t.Reserved)
			t.Free += back
			t.Reserved -= back
			size -= back
		}
	}
}

// allocate gives a container of a pod being admitted its blocks (upstream's
// static Allocate under the topology manager's none policy). A container
// already in the state keeps its blocks.
func (p *static) allocate(s *state.State, pod *v1.Pod, c *v1.Container, tm hint) (bool, error) {
	uid := string(pod.UID)
	req, err := containerRequests(c)
	if err != nil || len(req) == 0 {
		return false, err
	}
	if blocks := s.Blocks(uid, c.Name); blocks != nil {
		p.updateReusable(pod, c, blocks)
		return true, nil
	}
	ms := s.Machine.Clone()
	best, err := p.affinity(ms, uid, req, tm)
	if err != nil {
		return true, err
	}
	bits := best.NUMANodeAffinity.Bits()
	var blocks []state.Block
	for _, name := range req.types() {
		size := req[name]
		blocks = append(blocks, state.Block{NUMAAffinity: bits, Type: name, Size: size})
		if reuse := p.reusableOf(uid, best.NUMANodeAffinity, name); reuse >= size {
			size = 0
		} else {
			size -= reuse
		}
		reserve(ms, bits, name, size)
	}
	p.updateReusable(pod, c, blocks)
	s.Machine = ms
	s.SetBlocks(uid, c.Name, blocks)
	p.updateInitBlocks(s, pod, c, blocks)
	return true, nil
}

// isRegularInit tells whether c is an init container that is not a
// sidecar.
func isRegularInit(pod *v1.Pod, c *v1.Container) bool {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return !podspec.IsSidecar(&pod.Spec.InitContainers[i])
		}
	}
	return false
}

// updateReusable is upstream's updatePodReusableMemory: a regular init
// container's blocks can be reused by the containers after it; what a
// later container takes is no longer reusable.
func (p *static) updateReusable(pod *v1.Pod, c *v1.Container, blocks []state.Block) {
	uid := string(pod.UID)
	for other := range p.reusable {
		if other != uid {
			delete(p.reusable, other)
		}
	}
	if isRegularInit(pod, c) {
		if p.reusable[uid] == nil {
			p.reusable[uid] = map[bitmask.Mask]map[v1.ResourceName]uint64{}
		}
		for _, b := range blocks {
			mask, _ := bitmask.New(b.NUMAAffinity...)
			if p.reusable[uid][mask] == nil {
				p.reusable[uid][mask] = map[v1.ResourceName]uint64{}
			}
			if b.Size > p.reusable[uid][mask][b.Type] {
				p.reusable[uid][mask][b.Type] = b.Size
			}
		}
		return
	}
	for _, b := range blocks {
		mask, _ := bitmask.New(b.NUMAAffinity...)
		if reuse := p.reusableOf(uid, mask, b.Type); reuse != 0 {
			p.reusable[uid][mask][b.Type] = reuse - min(reuse, b.Size)
		}
	}
}

// updateInitBlocks is upstream's updateInitContainersMemoryBlocks: the
// init containers before c give up what c reuses, so that the blocks of a
// pod add up to what it holds.
func (p *static) updateInitBlocks(s *state.State, pod *v1.Pod, c *v1.Container, blocks []state.Block) {
	uid := string(pod.UID)
	for _, cb := range blocks {
		size := cb.Size
		for i := range pod.Spec.InitContainers {
			ic := &pod.Spec.InitContainers[i]
			if ic.Name == c.Name || size == 0 {
				break
			}
			if podspec.IsSidecar(ic) {
				continue
			}
			ib := s.Blocks(uid, ic.Name)
			if len(ib) == 0 {
				continue
			}
			for j := range ib {
				b := &ib[j]
				if b.Size == 0 || b.Type != cb.Type || !slices.Equal(b.NUMAAffinity, cb.NUMAAffinity) {
					continue
				}
				take := min(b.Size, size)
				b.Size -= take
				size -= take
			}
			s.SetBlocks(uid, ic.Name, ib)
		}
	}
}

// remove drops a container's blocks and gives the memory back.
func remove(s *state.State, uid, container string) bool {
	blocks := s.Blocks(uid, container)
	if blocks == nil {
		return false
	}
	s.Delete(uid, container)
	release(s.Machine, blocks)
	return true
}

// validateState is upstream's: an empty state gets the default machine;
// else the machine recorded must be the default with the recorded blocks
// applied (total, reserved and allocatable unchanged: no memory added or
// removed, no reservation changed).
func validateState(s *state.State, nodes []NUMANode, reserved reservedMemory) error {
	if len(s.Machine) == 0 {
		if len(s.Assignments) != 0 {
			return errors.New("[memorymanager] machine state can not be empty when it has memory assignments")
		}
		s.Machine = defaultMachineState(nodes, reserved)
		return nil
	}
	expected := defaultMachineState(nodes, reserved)
	for _, uid := range s.Pods() {
		for name, blocks := range s.Assignments[uid] {
			for _, b := range blocks {
				for _, id := range b.NUMAAffinity {
					ns, ok := expected[id]
					if !ok {
						return fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses the NUMA that does not exist", uid, name)
					}
					if _, ok := ns.MemoryMap[b.Type]; !ok {
						return fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses memory resource that does not exist", uid, name)
					}
				}
				reserve(expected, b.NUMAAffinity, b.Type, b.Size)
			}
		}
	}
	if !machineStatesEqual(s.Machine, expected) {
		return errors.New("[memorymanager] the expected machine state is different from the real one")
	}
	return nil
}

// machineStatesEqual is upstream's areMachineStatesEqual: same nodes,
// assignments, groups, tables (total, reserved, allocatable), and the
// same free and reserved over each group.
func machineStatesEqual(a, b state.NUMANodeMap) bool {
	if len(a) != len(b) {
		return false
	}
	for id, na := range a {
		nb, ok := b[id]
		if !ok || na.NumberOfAssignments != nb.NumberOfAssignments || !sameGroup(na.Cells, nb.Cells) || len(na.MemoryMap) != len(nb.MemoryMap) {
			return false
		}
		for name, ta := range na.MemoryMap {
			tb, ok := nb.MemoryMap[name]
			if !ok || ta.TotalMemSize != tb.TotalMemSize || ta.SystemReserved != tb.SystemReserved || ta.Allocatable != tb.Allocatable {
				return false
			}
			var fa, ra, fb, rb uint64
			for _, cell := range na.Cells {
				if t := table(a, cell, name); t != nil {
					fa, ra = fa+t.Free, ra+t.Reserved
				}
				if t := table(b, cell, name); t != nil {
					fb, rb = fb+t.Free, rb+t.Reserved
				}
			}
			if fa != fb || ra != rb {
				return false
			}
		}
	}
	return true
}

// allocatable are the blocks the node can pin: per node and type, its
// allocatable (upstream's GetAllocatableMemory).
func allocatable(ms state.NUMANodeMap) []state.Block {
	var out []state.Block
	for _, id := range slices.Sorted(maps.Keys(ms)) {
		for _, name := range slices.Sorted(maps.Keys(ms[id].MemoryMap)) {
			if a := ms[id].MemoryMap[name].Allocatable; a > 0 {
				out = append(out, state.Block{NUMAAffinity: []int{id}, Type: name, Size: a})
			}
		}
	}
	return out
}
