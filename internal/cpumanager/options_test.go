package cpumanager

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/topologymanager"
)

// exclusiveOf admits a one-container Guaranteed pod of cpus CPUs and
// returns its exclusive CPUs.
func (e *env) exclusiveOf(t *testing.T, uid, cpus string) cpuset.CPUSet {
	t.Helper()
	if r := e.admit(t, pod(uid, nil, ctr("c", cpus, "64Mi", true))); !r.Admit {
		t.Fatalf("%s refused: %+v", uid, r)
	}
	return e.m.Exclusive(uid, "c")
}

// perNUMA counts set's CPUs per NUMA node.
func perNUMA(topo *Topology, set cpuset.CPUSet) map[int]int {
	out := map[int]int{}
	for _, id := range set.UnsortedList() {
		out[topo.CPUDetails[id].NUMANodeID]++
	}
	return out
}

// TestDistributeCPUsAcrossCores: spread over cores, not a core's threads
// together (CPU 0 reserved).
func TestDistributeCPUsAcrossCores(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]string
		want cpuset.CPUSet
	}{
		{nil, cpuset.New(1, 5)},
		{map[string]string{OptionDistributeAcrossCores: "true"}, cpuset.New(1, 2)},
	} {
		e := newEnv(t, topoSingleSocketHT, "", tc.opts, "1")
		if got := e.exclusiveOf(t, "g", "2"); !got.Equals(tc.want) {
			t.Errorf("%v: %s, want %s", tc.opts, got, tc.want)
		}
	}
}

// TestDistributeCPUsAcrossNUMA: 26 CPUs on NUMA nodes of 20 are 13 and 13
// with the option, a whole node and 6 without; with full-pcpus-only in
// groups of whole cores.
func TestDistributeCPUsAcrossNUMA(t *testing.T) {
	topo := topoDualSocketMultiNumaPerSocketHT
	for _, tc := range []struct {
		opts   map[string]string
		shares []int
	}{
		{nil, []int{6, 20}},
		{map[string]string{OptionDistributeCPUsAcrossNUMA: "true"}, []int{13, 13}},
		{map[string]string{OptionDistributeCPUsAcrossNUMA: "true", OptionFullPCPUsOnly: "true"}, []int{12, 14}},
	} {
		e := newEnvConfig(t, Config{Options: tc.opts, ReservedSystemCPUs: "39,79", Topology: topo})
		got := e.exclusiveOf(t, "g", "26")
		var shares []int
		for _, n := range perNUMA(topo, got) {
			shares = append(shares, n)
		}
		if len(shares) == 2 && shares[0] > shares[1] {
			shares[0], shares[1] = shares[1], shares[0]
		}
		if got.Size() != 26 || len(shares) != 2 || shares[0] != tc.shares[0] || shares[1] != tc.shares[1] {
			t.Errorf("%v: %s, NUMA shares %v, want %v", tc.opts, got, shares, tc.shares)
		}
		if tc.opts[OptionFullPCPUsOnly] == "true" && !topo.CoreSiblings(got).Equals(got) {
			t.Errorf("%v: %s is not whole cores", tc.opts, got)
		}
	}
}

// TestAlignBySocketHints: upstream's two align-by-socket cases
// (topology_hints_test.go): a hint as narrow in sockets as the request
// allows is preferred too.
func TestAlignBySocketHints(t *testing.T) {
	for _, tc := range []struct {
		name, free, cpus string
		opts             map[string]string
		want             string
	}{
		{"socket aligned hints", "2-3,11", "2", map[string]string{OptionAlignBySocket: "true"},
			"[0]/true [0 1]/true [0 2]/false [0 3]/false [0 1 2]/false [0 1 3]/false [0 2 3]/false [0 1 2 3]/false "},
		{"without the option", "2-3,11", "2", nil,
			"[0]/true [0 1]/false [0 2]/false [0 3]/false [0 1 2]/false [0 1 3]/false [0 2 3]/false [0 1 2 3]/false "},
		{"two sockets needed", "0-28,40-57", "41", map[string]string{OptionAlignBySocket: "true"}, "[0 1 2]/true [0 1 2 3]/true "},
		{"two sockets needed, without the option", "0-28,40-57", "41", nil, "[0 1 2]/true [0 1 2 3]/false "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvConfig(t, Config{Options: tc.opts, ReservedSystemCPUs: "79", Topology: topoDualSocketMultiNumaPerSocketHT})
			e.m.state.defaultSet = mustParseCPUSet(t, tc.free).Union(cpuset.New(79))
			p := pod("g", nil, ctr("c", tc.cpus, "64Mi", true))
			got := e.m.TopologyHints(context.Background(), p, &p.Spec.Containers[0])
			if s := hintsString(got[string(v1.ResourceCPU)]); s != tc.want {
				t.Errorf("hints %q, want %q", s, tc.want)
			}
		})
	}
	if _, err := New(Config{Policy: PolicyStatic, Options: map[string]string{OptionAlignBySocket: "true"}, AlphaOptions: true,
		TopologyPolicy: topologymanager.PolicySingleNumaNode, ReservedSystemCPUs: "0", Topology: topoDualSocketMultiNumaPerSocketHT,
		ActivePods: func() []*v1.Pod { return nil }, SourcesReady: func() bool { return true }, Runtime: &fakeRuntime{}}); err == nil ||
		!strings.Contains(err.Error(), "incompatible with CPUManager align-by-socket policy option") {
		t.Errorf("align-by-socket with single-numa-node: %v", err)
	}
}

// TestAlignBySocketAllocation: the affinity's NUMA node widened to its
// socket: 22 CPUs with affinity NUMA node 0 stay in socket 0.
func TestAlignBySocketAllocation(t *testing.T) {
	topo := topoDualSocketMultiNumaPerSocketHT
	for _, tc := range []struct {
		opts        map[string]string
		wantSockets int
	}{
		{nil, 2},
		{map[string]string{OptionAlignBySocket: "true"}, 1},
	} {
		e := newEnvConfig(t, Config{Options: tc.opts, ReservedSystemCPUs: "79", Topology: topo})
		// Socket 1 nearly full: the packed fill after NUMA node 0 goes to
		// it (fewest free CPUs first) unless aligned by socket.
		e.m.state.defaultSet = e.m.state.defaultSet.Difference(mustParseCPUSet(t, "20-28,60-68,30-35,70-75"))
		p := pod("g", nil, ctr("c", "22", "64Mi", true))
		if err := e.m.Allocate(context.Background(), p, &p.Spec.Containers[0], topologymanager.TopologyHint{NUMANodeAffinity: bitmask.Mask(1), Preferred: true}); err != nil {
			t.Fatal(err)
		}
		got := e.m.Exclusive("g", "c")
		if n := topo.CPUDetails.KeepOnly(got).Sockets().Size(); got.Size() != 22 || n != tc.wantSockets {
			t.Errorf("%v: %s in %d sockets, want %d", tc.opts, got, n, tc.wantSockets)
		}
	}
}

// TestPreferAlignByUncoreCache: 4 CPUs from one free uncore cache rather
// than the lowest free cores across two, and the uncore_cache alignment
// counted; full-pcpus-only counts physical_cpu alignments and failures.
func TestPreferAlignByUncoreCache(t *testing.T) {
	for _, tc := range []struct {
		opts    map[string]string
		want    cpuset.CPUSet
		aligned float64
	}{
		{nil, cpuset.New(1, 2, 3, 4), 0},
		{map[string]string{OptionPreferAlignByUncoreCache: "true"}, cpuset.New(4, 5, 6, 7), 1},
	} {
		reg := prometheus.NewRegistry()
		e := newEnvConfig(t, Config{Options: tc.opts, ReservedSystemCPUs: "0", Topology: topoUncoreSingleSocketNoSMT,
			Alignment: topologymanager.NewAlignmentMetrics(reg)})
		if got := e.exclusiveOf(t, "g", "4"); !got.Equals(tc.want) {
			t.Errorf("%v: %s, want %s", tc.opts, got, tc.want)
		}
		if got := gathered(t, reg, "container_aligned_compute_resources_count", "uncore_cache"); got != tc.aligned {
			t.Errorf("%v: uncore_cache aligned %v, want %v", tc.opts, got, tc.aligned)
		}
	}
	reg := prometheus.NewRegistry()
	e := newEnvConfig(t, Config{Options: map[string]string{OptionFullPCPUsOnly: "true"}, ReservedSystemCPUs: "0", Topology: topoSingleSocketHT,
		Alignment: topologymanager.NewAlignmentMetrics(reg)})
	e.exclusiveOf(t, "g", "2")
	if r := e.admit(t, pod("odd", nil, ctr("c", "1", "64Mi", true))); r.Admit {
		t.Fatal("an odd request admitted under full-pcpus-only")
	}
	if a, f := gathered(t, reg, "container_aligned_compute_resources_count", "physical_cpu"),
		gathered(t, reg, "container_aligned_compute_resources_failure_count", "physical_cpu"); a != 1 || f != 1 {
		t.Errorf("physical_cpu aligned %v, failures %v; want 1 and 1", a, f)
	}
}

// gathered is the value of kubelet_<name>{scope="container",boundary}
// in reg (-1 when absent).
func gathered(t *testing.T, reg *prometheus.Registry, name, boundary string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubelet_"+name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["scope"] == "container" && labels["boundary"] == boundary {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
