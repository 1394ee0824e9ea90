package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// upstream's state_checkpoint_test.go files.
const (
	upstreamV1 = `{
		"policyName":"static",
		"machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},
		"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},
		"checksum": 4215593881
	}`
	// The v1 part is corrupted on purpose: data is what counts.
	upstreamV3 = `{
		"policyName":"other",
		"machineState":{"0":{"numberOfAssignments":5,"memoryMap":{"memory":{"total":1024,"systemReserved":256,"allocatable":768,"reserved":256,"free":512}},"cells":[]}},
		"entries":{"pod":{"containerX":[{"numaAffinity":[0],"type":"memory","size":128}]}},
		"checksum": 1234,
		"data": "{\"policyName\":\"static\",\"machineState\":{\"0\":{\"numberOfAssignments\":0,\"memoryMap\":{\"memory\":{\"total\":2048,\"systemReserved\":512,\"allocatable\":1536,\"reserved\":512,\"free\":1024}},\"cells\":[]}},\"entries\":{\"pod\":{\"container1\":[{\"numaAffinity\":[0],\"type\":\"memory\",\"size\":512}]}}}",
		"dataChecksum": 1849615440
	}`
	upstreamV2 = `{
		"policyName":"static",
		"machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},
		"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},
		"podEntries":{"pod":{"memoryBlocks":[{"numaAffinity":[0],"type":"memory","size":512}]}},
		"checksum": 1278640530
	}`
)

func write(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestV1ChecksumUpstreamVector: the dump of nodelet's types is upstream's.
func TestV1ChecksumUpstreamVector(t *testing.T) {
	var cp MemoryManagerCheckpoint
	if err := json.Unmarshal([]byte(upstreamV1), &cp); err != nil {
		t.Fatal(err)
	}
	if got := V1Checksum(cp); got != 4215593881 {
		t.Errorf("V1Checksum = %d, want upstream's 4215593881", got)
	}
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name, content, policy, wantErr string
		wantSize                       uint64
	}{
		{name: "v3 (the data section counts)", content: upstreamV3, policy: "static", wantSize: 512},
		{name: "v1 of an older kubelet", content: upstreamV1, policy: "static", wantSize: 512},
		{name: "v2 of an older kubelet", content: upstreamV2, policy: "static", wantSize: 512},
		{name: "v1 with its checksum zeroed", content: strings.Replace(upstreamV1, "4215593881", "0", 1), policy: "static", wantSize: 512},
		{name: "v1 with a bad checksum", content: strings.Replace(upstreamV1, "4215593881", "101010", 1), policy: "static", wantErr: "checkpoint is corrupted"},
		{name: "v3 with a bad data checksum", content: strings.Replace(upstreamV3, "1849615440", "1234", 1), policy: "static", wantErr: "checkpoint is corrupted"},
		{name: "another policy", content: upstreamV3, policy: "Static", wantErr: `configured policy "Static" differs from state checkpoint policy "static"`},
		{name: "not JSON", content: "{", policy: "static", wantErr: "please drain this node and delete the memory manager checkpoint file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(write(t, tc.content), tc.policy)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := s.Blocks("pod", "container1")
			if len(b) != 1 || b[0].Size != tc.wantSize || b[0].Type != v1.ResourceMemory || s.Machine[0].MemoryMap[v1.ResourceMemory].Free != 1024 {
				t.Errorf("restored %+v %+v", s.Assignments, s.Machine[0])
			}
		})
	}
}

func TestLoadMissingIsEmpty(t *testing.T) {
	s, err := Load(filepath.Join(t.TempDir(), FileName), "Static")
	if err != nil || len(s.Assignments) != 0 || len(s.Machine) != 0 {
		t.Fatalf("Load of no file = %+v, %v", s, err)
	}
}

// TestStoreRoundTrip: what nodelet writes reads back, and its v1 part
// verifies with the v1 checksum older kubelets check.
func TestStoreRoundTrip(t *testing.T) {
	s := New("Static")
	s.Machine = NUMANodeMap{0: {MemoryMap: map[v1.ResourceName]*MemoryTable{v1.ResourceMemory: {TotalMemSize: 2048, SystemReserved: 512, Allocatable: 1536, Reserved: 512, Free: 1024}}, Cells: []int{0}, NumberOfAssignments: 1}}
	s.SetBlocks("pod", "c", []Block{{NUMAAffinity: []int{0}, Type: v1.ResourceMemory, Size: 512}})
	path := filepath.Join(t.TempDir(), FileName)
	if err := s.Store(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var cp MemoryManagerCheckpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Checksum == 0 || cp.Checksum != V1Checksum(cp) {
		t.Errorf("v1 checksum %d, want %d", cp.Checksum, V1Checksum(cp))
	}
	got, err := Load(path, "Static")
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Blocks("pod", "c"); len(b) != 1 || b[0].Size != 512 || got.Machine[0].NumberOfAssignments != 1 {
		t.Errorf("round trip: %+v", got)
	}
}
