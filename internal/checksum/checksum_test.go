package checksum

import "testing"

// TestUpstreamVectors: checksums from upstream's own checkpoint tests.
func TestUpstreamVectors(t *testing.T) {
	if got := String(`{"policyName":"none","defaultCPUSet":"4-6","unknownField":"value"}`); got != 3492408555 {
		t.Errorf("String = %d, want upstream's 3492408555", got)
	}
	dumped := "(*state.CPUManagerCheckpointV3){PolicyName:(string)static DefaultCPUSet:(string)7-9 " +
		"Entries:(map[string]map[string]string)map[pod:map[container1:4-6 container2:1-3]] PodEntries:(state.PodCPUAssignments)map[] Checksum:(checksum.Checksum)0}"
	if got := OfDump(dumped); got != 1942532442 {
		t.Errorf("OfDump = %d, want upstream's 1942532442", got)
	}
}
