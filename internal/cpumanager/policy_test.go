package cpumanager

import (
	"testing"

	"github.com/nodelet/nodelet/internal/topologymanager"
)

// TestPolicyOptionsCompatibility: upstream's table (policy_options_test.go),
// both gates on.
func TestPolicyOptionsCompatibility(t *testing.T) {
	for _, tc := range []struct {
		description string
		opts        map[string]string
		wantErr     bool
	}{
		{"FullPhysicalCPUsOnly set to true only", map[string]string{OptionFullPCPUsOnly: "true"}, false},
		{"DistributeCPUsAcrossCores set to true only", map[string]string{OptionDistributeAcrossCores: "true"}, false},
		{"PreferAlignByUnCoreCache and StrictCPUReservation", map[string]string{OptionPreferAlignByUncoreCache: "true", OptionStrictCPUReservation: "true"}, false},
		{"PreferAlignByUnCoreCache and FullPCPUsOnly", map[string]string{OptionPreferAlignByUncoreCache: "true", OptionFullPCPUsOnly: "true"}, false},
		{"PreferAlignByUnCoreCache and AlignBySocket", map[string]string{OptionPreferAlignByUncoreCache: "true", OptionAlignBySocket: "true"}, false},
		{"FullPhysicalCPUsOnly and DistributeCPUsAcrossCores", map[string]string{OptionFullPCPUsOnly: "true", OptionDistributeAcrossCores: "true"}, true},
		{"DistributeCPUsAcrossNUMA and DistributeCPUsAcrossCores", map[string]string{OptionDistributeCPUsAcrossNUMA: "true", OptionDistributeAcrossCores: "true"}, true},
		{"PreferAlignByUnCoreCache and DistributeCPUsAcrossCores", map[string]string{OptionPreferAlignByUncoreCache: "true", OptionDistributeAcrossCores: "true"}, true},
		{"PreferAlignByUnCoreCache and DistributeCPUsAcrossNUMA", map[string]string{OptionPreferAlignByUncoreCache: "true", OptionDistributeCPUsAcrossNUMA: "true"}, true},
		{"all four that can go together", map[string]string{OptionFullPCPUsOnly: "true", OptionDistributeCPUsAcrossNUMA: "true", OptionAlignBySocket: "true", OptionStrictCPUReservation: "true"}, false},
	} {
		t.Run(tc.description, func(t *testing.T) {
			if _, err := ParseOptions(PolicyStatic, tc.opts, true, true); (err != nil) != tc.wantErr {
				t.Errorf("err %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// TestValidateWithTopology: upstream's TestValidateStaticPolicyOptions.
func TestValidateWithTopology(t *testing.T) {
	for _, tc := range []struct {
		description string
		opts        map[string]string
		topo        *Topology
		topoPolicy  string
		wantErr     bool
	}{
		{"align by socket not enabled", map[string]string{OptionFullPCPUsOnly: "true"}, topoDualSocketMultiNumaPerSocketHT, topologymanager.PolicySingleNumaNode, false},
		{"align by socket with single-numa-node", map[string]string{OptionAlignBySocket: "true"}, topoDualSocketMultiNumaPerSocketHT, topologymanager.PolicySingleNumaNode, true},
		{"align by socket with sockets > NUMA nodes", map[string]string{OptionAlignBySocket: "true"}, fakeTopoMultiSocketDualSocketPerNumaHT, topologymanager.PolicyNone, true},
		{"align by socket with none", map[string]string{OptionAlignBySocket: "true"}, topoDualSocketMultiNumaPerSocketHT, topologymanager.PolicyNone, false},
		{"align by socket with best-effort", map[string]string{OptionAlignBySocket: "true"}, topoDualSocketMultiNumaPerSocketHT, topologymanager.PolicyBestEffort, false},
		{"align by socket with restricted", map[string]string{OptionAlignBySocket: "true"}, topoDualSocketMultiNumaPerSocketHT, topologymanager.PolicyRestricted, false},
	} {
		t.Run(tc.description, func(t *testing.T) {
			o, err := ParseOptions(PolicyStatic, tc.opts, true, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.ValidateWithTopology(tc.topo, tc.topoPolicy); (err != nil) != tc.wantErr {
				t.Errorf("err %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
