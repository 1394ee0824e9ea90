package cpumanager

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPUInfo is where one logical CPU sits.
type CPUInfo struct {
	// Core is the core's ID: the lowest CPU ID among its threads, as
	// upstream's topology.Discover.
	Core   int
	Socket int
	NUMA   int
}

// Topology is the machine's CPUs, as upstream's topology.CPUTopology.
type Topology struct {
	CPUs map[int]CPUInfo
}

// NumCPUs, NumCores, NumSockets and NumNUMANodes count the machine's
// logical CPUs, cores, sockets and NUMA nodes.
func (t *Topology) NumCPUs() int      { return len(t.CPUs) }
func (t *Topology) NumCores() int     { return t.count(func(c CPUInfo) int { return c.Core }) }
func (t *Topology) NumSockets() int   { return t.count(func(c CPUInfo) int { return c.Socket }) }
func (t *Topology) NumNUMANodes() int { return t.count(func(c CPUInfo) int { return c.NUMA }) }

func (t *Topology) count(key func(CPUInfo) int) int {
	seen := map[int]bool{}
	for _, c := range t.CPUs {
		seen[key(c)] = true
	}
	return len(seen)
}

// CPUsPerCore is the number of threads per core (1 without SMT).
func (t *Topology) CPUsPerCore() int {
	if t.NumCores() == 0 {
		return 0
	}
	return t.NumCPUs() / t.NumCores()
}

// CPUsPerSocket is the number of logical CPUs per socket.
func (t *Topology) CPUsPerSocket() int {
	if t.NumSockets() == 0 {
		return 0
	}
	return t.NumCPUs() / t.NumSockets()
}

// All is every CPU of the machine.
func (t *Topology) All() cpuset.CPUSet {
	ids := make([]int, 0, len(t.CPUs))
	for id := range t.CPUs {
		ids = append(ids, id)
	}
	return cpuset.New(ids...)
}

// where is the set of CPUs among in whose key is k.
func (t *Topology) where(in cpuset.CPUSet, key func(CPUInfo) int, k int) cpuset.CPUSet {
	var ids []int
	for _, id := range in.UnsortedList() {
		if c, ok := t.CPUs[id]; ok && key(c) == k {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// CoreSiblings are the CPUs of the cores of cpus.
func (t *Topology) CoreSiblings(cpus cpuset.CPUSet) cpuset.CPUSet {
	out := cpuset.New()
	for _, id := range cpus.UnsortedList() {
		if c, ok := t.CPUs[id]; ok {
			out = out.Union(t.where(t.All(), coreOf, c.Core))
		}
	}
	return out
}

// NUMANodesOf are the NUMA nodes of cpus, sorted.
func (t *Topology) NUMANodesOf(cpus cpuset.CPUSet) []int {
	var out []int
	for _, id := range cpus.UnsortedList() {
		if c, ok := t.CPUs[id]; ok && !slices.Contains(out, c.NUMA) {
			out = append(out, c.NUMA)
		}
	}
	slices.Sort(out)
	return out
}

func coreOf(c CPUInfo) int   { return c.Core }
func socketOf(c CPUInfo) int { return c.Socket }
func numaOf(c CPUInfo) int   { return c.NUMA }

// Discover reads the online CPUs' topology from sysfs (root is "/" or a
// test's tree): the package (socket), the thread siblings (the core's ID
// is the lowest of them) and the NUMA node (cpuN/nodeM; 0 without one).
func Discover(root string) (*Topology, error) {
	base := filepath.Join(root, "sys/devices/system/cpu")
	online, err := readCPUSet(filepath.Join(base, "online"))
	if err != nil {
		return nil, fmt.Errorf("cpu topology: %w", err)
	}
	t := &Topology{CPUs: map[int]CPUInfo{}}
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
		t.CPUs[id] = CPUInfo{Core: core, Socket: socket, NUMA: numa}
	}
	if len(t.CPUs) == 0 {
		return nil, fmt.Errorf("cpu topology: no online CPU in %s", base)
	}
	return t, nil
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
