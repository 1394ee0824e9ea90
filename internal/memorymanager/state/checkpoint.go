package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/utils/dump"

	"github.com/nodelet/nodelet/internal/checksum"
	"github.com/nodelet/nodelet/internal/fsutil"
)

// FileName is the checkpoint's name in the root directory, as upstream.
const FileName = "memory_manager_state"

// MemoryManagerCheckpoint is upstream's MemoryManagerCheckpointV1, under
// the name its checksum is computed with: the part of the file every
// kubelet since 1.21 reads.
type MemoryManagerCheckpoint struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	Checksum     checksum.Checksum          `json:"checksum"`
}

// MemoryManagerCheckpointV2 is upstream's v2 (v1 and the pods' own
// blocks), read from files of kubelets that wrote it.
type MemoryManagerCheckpointV2 struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	PodEntries   PodMemoryAssignments       `json:"podEntries,omitempty"`
	Checksum     checksum.Checksum          `json:"checksum"`
}

// checkpointData is upstream's MemoryManagerCheckpointData (v3's data).
type checkpointData struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	PodEntries   PodMemoryAssignments       `json:"podEntries,omitempty"`
}

// file is upstream's v3 file: v1's fields inline, v2's podEntries when an
// older kubelet wrote them, data and its checksum.
type file struct {
	PolicyName   string                     `json:"policyName"`
	MachineState NUMANodeMap                `json:"machineState"`
	Entries      ContainerMemoryAssignments `json:"entries,omitempty"`
	PodEntries   PodMemoryAssignments       `json:"podEntries,omitempty"`
	Checksum     checksum.Checksum          `json:"checksum"`
	Data         string                     `json:"data"`
	DataChecksum uint64                     `json:"dataChecksum"`
}

// V1Checksum is upstream's checksum of the v1 part: FNV-32a of the hash
// dump of MemoryManagerCheckpoint with the checksum zeroed.
func V1Checksum(cp MemoryManagerCheckpoint) checksum.Checksum {
	cp.Checksum = 0
	return checksum.Checksum(checksum.OfDump(dump.ForHash(&cp)))
}

// v2Checksum is upstream's checksum of a v2 file (the type renamed
// MemoryManagerCheckpoint, as upstream does).
func v2Checksum(cp MemoryManagerCheckpointV2) checksum.Checksum {
	cp.Checksum = 0
	return checksum.Checksum(checksum.OfDump(strings.Replace(dump.ForHash(&cp), "MemoryManagerCheckpointV2", "MemoryManagerCheckpoint", 1)))
}

// Corrupt is upstream's advice with a state that cannot be restored.
func Corrupt(path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete the memory manager checkpoint file %q before restarting Kubelet", err, path)
}

// Load reads the checkpoint at path (none: an empty state of policy).
// Its policy must be policy, as upstream.
func Load(path, policy string) (*State, error) {
	s := New(policy)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, Corrupt(path, err)
	}
	data := checkpointData{PolicyName: f.PolicyName, MachineState: f.MachineState, Entries: f.Entries, PodEntries: f.PodEntries}
	switch {
	case f.Data != "" || f.DataChecksum != 0:
		if sum := checksum.String(f.Data); sum != f.DataChecksum {
			return nil, Corrupt(path, fmt.Errorf("checkpoint is corrupted (data checksum %d, expected %d)", sum, f.DataChecksum))
		}
		data = checkpointData{}
		if err := json.Unmarshal([]byte(f.Data), &data); err != nil {
			return nil, Corrupt(path, err)
		}
	case f.Checksum == 0:
		// v1 with its checksum zeroed: read as upstream does.
	case f.Checksum == v2Checksum(MemoryManagerCheckpointV2{PolicyName: f.PolicyName, MachineState: f.MachineState, Entries: f.Entries, PodEntries: f.PodEntries}):
	case f.PodEntries == nil && f.Checksum == V1Checksum(MemoryManagerCheckpoint{PolicyName: f.PolicyName, MachineState: f.MachineState, Entries: f.Entries}):
	default:
		return nil, Corrupt(path, fmt.Errorf("checkpoint is corrupted (checksum %d matches neither v1 nor v2)", f.Checksum))
	}
	if data.PolicyName != policy {
		return nil, Corrupt(path, fmt.Errorf("[memorymanager] configured policy %q differs from state checkpoint policy %q", policy, data.PolicyName))
	}
	if data.MachineState != nil {
		s.Machine = data.MachineState
	}
	if data.Entries != nil {
		s.Assignments = data.Entries
	}
	s.PodEntries = data.PodEntries
	return s, nil
}

// Encode is the checkpoint of s as upstream v1.37 writes it.
func (s *State) Encode() ([]byte, error) {
	data := checkpointData{PolicyName: s.Policy, MachineState: s.Machine, Entries: s.Assignments, PodEntries: s.PodEntries}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	v1 := MemoryManagerCheckpoint{PolicyName: s.Policy, MachineState: s.Machine, Entries: s.Assignments}
	f := file{PolicyName: s.Policy, MachineState: s.Machine, Entries: s.Assignments,
		Checksum: V1Checksum(v1), Data: string(raw), DataChecksum: checksum.String(string(raw))}
	return json.Marshal(f)
}

// Store writes s to path (a new file renamed over the old one); "" keeps
// it in memory.
func (s *State) Store(path string) error {
	if path == "" {
		return nil
	}
	out, err := s.Encode()
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, out, 0o600)
}
