package cpumanager

import (
	"testing"

	"k8s.io/utils/cpuset"
)

// Upstream's test topologies (policy_test.go).
func topoSingleSocketHT() *Topology {
	t := &Topology{CPUs: map[int]CPUInfo{}}
	for i := 0; i < 8; i++ {
		t.CPUs[i] = CPUInfo{Core: i % 4}
	}
	return t
}

func topoDualSocketHT() *Topology {
	t := &Topology{CPUs: map[int]CPUInfo{}}
	for i := 0; i < 12; i++ {
		t.CPUs[i] = CPUInfo{Core: i % 6, Socket: i % 2, NUMA: i % 2}
	}
	return t
}

func topoDualSocketMultiNumaPerSocketHT() *Topology {
	t := &Topology{CPUs: map[int]CPUInfo{}}
	for i := 0; i < 80; i++ {
		core := i % 40
		t.CPUs[i] = CPUInfo{Core: core, Socket: core / 20, NUMA: core / 10}
	}
	return t
}

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestTakeByTopology: upstream's takeByTopologyNUMAPacked cases
// (cpu_assignment_test.go), same inputs, same answers.
func TestTakeByTopology(t *testing.T) {
	for _, tc := range []struct {
		name      string
		topo      *Topology
		available string
		n         int
		err       string
		want      string
	}{
		{"more than available", topoSingleSocketHT(), "0,2,4,6", 5, "not enough cpus available to satisfy request: requested=5, available=4", ""},
		{"zero", topoSingleSocketHT(), "0-7", 0, "", ""},
		{"one", topoSingleSocketHT(), "0-7", 1, "", "0"},
		{"one, some taken", topoSingleSocketHT(), "1,3,5,6,7", 1, "", "6"},
		{"two: a whole core", topoSingleSocketHT(), "0-7", 2, "", "0,4"},
		{"all", topoSingleSocketHT(), "0-7", 8, "", "0-7"},
		{"two, one core free", topoSingleSocketHT(), "0-3,6", 2, "", "2,6"},
		{"a socket", topoDualSocketHT(), "0-11", 6, "", "0,2,4,6,8,10"},
		{"one, core from socket 0", topoDualSocketHT(), "1-5,7-11", 1, "", "2"},
		{"4 full cores, 3 filling NUMA 0", topoDualSocketHT(), "0-11", 8, "", "0,6,2,8,4,10,1,7"},
		{"a socket, multi-NUMA per socket", topoDualSocketMultiNumaPerSocketHT(), "0-79", 40, "", "0-19,40-59"},
		{"a NUMA node", topoDualSocketMultiNumaPerSocketHT(), "0-79", 20, "", "0-9,40-49"},
		{"a NUMA node, one taken", topoDualSocketMultiNumaPerSocketHT(), "10-39,50-79", 20, "", "10-19,50-59"},
		{"a socket and a NUMA node", topoDualSocketMultiNumaPerSocketHT(), "0-79", 60, "", "0-29,40-69"},
		{"a socket and a NUMA node, a core taken", topoDualSocketMultiNumaPerSocketHT(), "1-39,41-79", 60, "", "10-39,50-79"},
		{"32 cores: 3 NUMA nodes and 2 of the fourth", topoDualSocketMultiNumaPerSocketHT(), "0-79", 64, "", "0-29,40-69,30,31,70,71"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := takeByTopology(tc.topo, mustParse(t, tc.available), tc.n)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := mustParse(t, tc.want); !got.Equals(want) {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}
