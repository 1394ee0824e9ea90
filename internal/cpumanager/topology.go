package cpumanager

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPUInfo is where one logical CPU sits, as upstream's topology.CPUInfo.
type CPUInfo struct {
	NUMANodeID int
	SocketID   int
	// CoreID is the core's ID: the lowest CPU ID among its threads, as
	// upstream's topology.Discover.
	CoreID int
	// UncoreCacheID is the ID of the last-level (L3) cache the CPU shares
	// with only some of its NUMA node's cores; the socket's ID when the
	// cache spans the whole NUMA node (cadvisor's and upstream's rule).
	UncoreCacheID int
}

// CPUDetails is the CPUs by ID, as upstream's topology.CPUDetails.
type CPUDetails map[int]CPUInfo

// Topology is the machine's CPUs, as upstream's topology.CPUTopology
// (same fields, so upstream's test topologies read as they are).
type Topology struct {
	NumCPUs        int
	NumCores       int
	NumUncoreCache int
	NumSockets     int
	NumNUMANodes   int
	CPUDetails     CPUDetails
}

// NewTopology counts details into a Topology.
func NewTopology(details CPUDetails) *Topology {
	return &Topology{
		NumCPUs:        len(details),
		NumCores:       details.Cores().Size(),
		NumUncoreCache: details.UncoreCaches().Size(),
		NumSockets:     details.Sockets().Size(),
		NumNUMANodes:   details.NUMANodes().Size(),
		CPUDetails:     details,
	}
}

// CPUsPerCore is the number of threads per core (1 without SMT).
func (t *Topology) CPUsPerCore() int { return perGroup(t.NumCPUs, t.NumCores) }

// CPUsPerSocket is the number of logical CPUs per socket.
func (t *Topology) CPUsPerSocket() int { return perGroup(t.NumCPUs, t.NumSockets) }

// CPUsPerUncore is the number of logical CPUs per uncore cache.
func (t *Topology) CPUsPerUncore() int { return perGroup(t.NumCPUs, t.NumUncoreCache) }

func perGroup(cpus, groups int) int {
	if groups == 0 {
		return 0
	}
	return cpus / groups
}

// All is every CPU of the machine.
func (t *Topology) All() cpuset.CPUSet { return t.CPUDetails.CPUs() }

// CoreSiblings are the CPUs of the cores of cpus.
func (t *Topology) CoreSiblings(cpus cpuset.CPUSet) cpuset.CPUSet {
	return t.CPUDetails.CPUsInCores(t.CPUDetails.KeepOnly(cpus).Cores().UnsortedList()...)
}

// UncoreAligned reports whether cpus share one uncore cache (upstream's
// CheckAlignment; an empty or one-CPU set is aligned).
func (t *Topology) UncoreAligned(cpus cpuset.CPUSet) bool {
	if cpus.Size() <= 1 {
		return true
	}
	kept := t.CPUDetails.KeepOnly(cpus)
	return len(kept) == cpus.Size() && kept.UncoreCaches().Size() == 1
}

func numaOf(c CPUInfo) int   { return c.NUMANodeID }
func socketOf(c CPUInfo) int { return c.SocketID }
func coreOf(c CPUInfo) int   { return c.CoreID }
func uncoreOf(c CPUInfo) int { return c.UncoreCacheID }

// collect is the set of key(cpu) over the CPUs whose in-key is one of ids
// (every CPU when in is nil).
func (d CPUDetails) collect(in func(CPUInfo) int, ids []int, key func(int, CPUInfo) int) cpuset.CPUSet {
	var out []int
	for cpu, info := range d {
		if in == nil || slices.Contains(ids, in(info)) {
			out = append(out, key(cpu, info))
		}
	}
	return cpuset.New(out...)
}

func cpuKey(cpu int, _ CPUInfo) int { return cpu }

func infoKey(key func(CPUInfo) int) func(int, CPUInfo) int {
	return func(_ int, c CPUInfo) int { return key(c) }
}

// KeepOnly is d restricted to cpus.
func (d CPUDetails) KeepOnly(cpus cpuset.CPUSet) CPUDetails {
	out := CPUDetails{}
	for cpu, info := range d {
		if cpus.Contains(cpu) {
			out[cpu] = info
		}
	}
	return out
}

// The IDs of d's CPUs, NUMA nodes, sockets, cores and uncore caches, and
// those of one level within others, as upstream's CPUDetails methods.
func (d CPUDetails) CPUs() cpuset.CPUSet         { return d.collect(nil, nil, cpuKey) }
func (d CPUDetails) NUMANodes() cpuset.CPUSet    { return d.collect(nil, nil, infoKey(numaOf)) }
func (d CPUDetails) Sockets() cpuset.CPUSet      { return d.collect(nil, nil, infoKey(socketOf)) }
func (d CPUDetails) Cores() cpuset.CPUSet        { return d.collect(nil, nil, infoKey(coreOf)) }
func (d CPUDetails) UncoreCaches() cpuset.CPUSet { return d.collect(nil, nil, infoKey(uncoreOf)) }
func (d CPUDetails) CPUsInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(numaOf, ids, cpuKey)
}
func (d CPUDetails) CPUsInSockets(ids ...int) cpuset.CPUSet { return d.collect(socketOf, ids, cpuKey) }
func (d CPUDetails) CPUsInCores(ids ...int) cpuset.CPUSet   { return d.collect(coreOf, ids, cpuKey) }
func (d CPUDetails) CPUsInUncoreCaches(ids ...int) cpuset.CPUSet {
	return d.collect(uncoreOf, ids, cpuKey)
}
func (d CPUDetails) NUMANodesInSockets(ids ...int) cpuset.CPUSet {
	return d.collect(socketOf, ids, infoKey(numaOf))
}
func (d CPUDetails) SocketsInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(numaOf, ids, infoKey(socketOf))
}
func (d CPUDetails) CoresInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(numaOf, ids, infoKey(coreOf))
}
func (d CPUDetails) CoresInSockets(ids ...int) cpuset.CPUSet {
	return d.collect(socketOf, ids, infoKey(coreOf))
}
func (d CPUDetails) UncoreInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(numaOf, ids, infoKey(uncoreOf))
}

// CoresNeededInUncoreCache is the cores of the uncore caches ids, at most
// the numCoresNeeded lowest.
func (d CPUDetails) CoresNeededInUncoreCache(numCoresNeeded int, ids ...int) cpuset.CPUSet {
	cores := d.collect(uncoreOf, ids, infoKey(coreOf))
	if cores.Size() <= numCoresNeeded {
		return cores
	}
	return cpuset.New(cores.List()[:numCoresNeeded]...)
}

// AreNUMANodesInSameSocket reports whether the NUMA nodes all exist and
// sit in at most one socket.
func (d CPUDetails) AreNUMANodesInSameSocket(numaNodes []int) bool {
	all := d.NUMANodes()
	for _, id := range numaNodes {
		if !all.Contains(id) {
			return false
		}
	}
	return d.SocketsInNUMANodes(numaNodes...).Size() <= 1
}

// Discover reads the online CPUs' topology from sysfs (root is "/" or a
// test's tree): the package (socket), the thread siblings (the core's ID
// is the lowest of them), the NUMA node (cpuN/nodeM; 0 without one) and
// the uncore cache (a level 3+ cache shared by fewer CPUs than the NUMA
// node has, as cadvisor tells upstream; else the socket).
func Discover(root string) (*Topology, error) {
	base := filepath.Join(root, "sys/devices/system/cpu")
	online, err := readCPUSet(filepath.Join(base, "online"))
	if err != nil {
		return nil, fmt.Errorf("cpu topology: %w", err)
	}
	details := CPUDetails{}
	l3 := map[int]cache{}
	for _, id := range online.List() {
		dir := filepath.Join(base, "cpu"+strconv.Itoa(id))
		socket, err := readInt(filepath.Join(dir, "topology/physical_package_id"))
		if err != nil {
			return nil, fmt.Errorf("cpu topology of CPU %d: %w", id, err)
		}
		siblings, err := readCPUSet(filepath.Join(dir, "topology/thread_siblings_list"))
		if err != nil {
			return nil, fmt.Errorf("cpu topology of CPU %d: %w", id, err)
		}
		core := id
		if !siblings.IsEmpty() {
			core = siblings.List()[0]
		}
		numa := 0
		if m, _ := filepath.Glob(filepath.Join(dir, "node[0-9]*")); len(m) > 0 {
			if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m[0]), "node")); err == nil {
				numa = n
			}
		}
		details[id] = CPUInfo{CoreID: core, SocketID: socket, NUMANodeID: numa, UncoreCacheID: socket}
		if c, ok := lastLevelCache(dir); ok {
			l3[id] = c
		}
	}
	if len(details) == 0 {
		return nil, fmt.Errorf("cpu topology: no online CPU in %s", base)
	}
	for id, c := range l3 {
		info := details[id]
		if c.cpus != details.CPUsInNUMANodes(info.NUMANodeID).Size() {
			info.UncoreCacheID = c.id
			details[id] = info
		}
	}
	return NewTopology(details), nil
}

type cache struct{ id, cpus int }

// lastLevelCache is the CPU's first cache of level 3 or more: its ID and
// how many CPUs share it.
func lastLevelCache(cpuDir string) (cache, bool) {
	dirs, _ := filepath.Glob(filepath.Join(cpuDir, "cache/index[0-9]*"))
	for _, d := range dirs {
		level, err := readInt(filepath.Join(d, "level"))
		if err != nil || level < 3 {
			continue
		}
		id, err := readInt(filepath.Join(d, "id"))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "shared_cpu_map"))
		if err != nil {
			continue
		}
		n := 0
		for _, word := range strings.Split(strings.TrimSpace(string(b)), ",") {
			v, err := strconv.ParseUint(word, 16, 32)
			if err != nil {
				n = -1
				break
			}
			n += bits.OnesCount64(v)
		}
		if n > 0 {
			return cache{id: id, cpus: n}, true
		}
	}
	return cache{}, false
}

func readCPUSet(path string) (cpuset.CPUSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cpuset.New(), err
	}
	return cpuset.Parse(strings.TrimSpace(string(b)))
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
