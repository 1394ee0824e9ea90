package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"k8s.io/utils/cpuset"
	"k8s.io/utils/dump"

	"github.com/nodelet/nodelet/internal/checksum"
	"github.com/nodelet/nodelet/internal/fsutil"
)

// StateFile is the checkpoint's name in the root directory, as upstream.
const StateFile = "cpu_manager_state"

// state is the CPU manager's record: the shared pool (upstream's default
// CPU set) and the exclusive CPUs by pod UID and container name.
type state struct {
	policy      string
	defaultSet  cpuset.CPUSet
	assignments map[string]map[string]cpuset.CPUSet
}

func newState(policy string) *state {
	return &state{policy: policy, defaultSet: cpuset.New(), assignments: map[string]map[string]cpuset.CPUSet{}}
}

func (s *state) set(uid, name string, cpus cpuset.CPUSet) {
	if s.assignments[uid] == nil {
		s.assignments[uid] = map[string]cpuset.CPUSet{}
	}
	s.assignments[uid][name] = cpus
}

func (s *state) remove(uid, name string) {
	delete(s.assignments[uid], name)
	if len(s.assignments[uid]) == 0 {
		delete(s.assignments, uid)
	}
}

// exclusive is every CPU assigned to a container.
func (s *state) exclusive() cpuset.CPUSet {
	out := cpuset.New()
	for _, cs := range s.assignments {
		for _, c := range cs {
			out = out.Union(c)
		}
	}
	return out
}

// checkpointData is upstream's CPUManagerCheckpointData (v4's data).
type checkpointData struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
}

// checkpointV2 is upstream's CPUManagerCheckpointV2, the part of the file
// older kubelets read.
type checkpointV2 struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// checkpointFile is upstream's v4 CPUManagerCheckpoint: the v2 fields
// (with their checksum) inline, data (checkpointData's JSON) and its
// checksum, which is the one that is verified.
type checkpointFile struct {
	checkpointV2
	Data         string `json:"data,omitempty"`
	DataChecksum uint64 `json:"dataChecksum,omitempty"`
}

// v2Checksum is upstream's checksum of the v2 part of the file v1.37
// writes: FNV-32a of the hash dump of its CPUManagerCheckpointV2 with the
// checksum zeroed and the type named CPUManagerCheckpoint.
func v2Checksum(cp checkpointV2) uint64 {
	return dumpChecksum("state.CPUManagerCheckpoint", cp, false)
}

// legacyChecksums are the checksums an older kubelet's file (no data
// section) verifies with in upstream v1.37: the v3 struct's own (with its
// empty podEntries), or, renamed CPUManagerCheckpoint, v3's or v2's.
func legacyChecksums(cp checkpointV2) []uint64 {
	return []uint64{
		dumpChecksum("state.CPUManagerCheckpointV3", cp, true),
		dumpChecksum("state.CPUManagerCheckpoint", cp, true),
		dumpChecksum("state.CPUManagerCheckpoint", cp, false),
		dumpChecksum("state.CPUManagerCheckpointV2", cp, false),
	}
}

// dumpChecksum is FNV-32a of the hash dump (k8s.io/utils/dump.ForHash) of
// upstream's checkpoint struct named typeName holding cp's fields (with
// v3's podEntries when v3), the checksum zeroed. The dump is spelled out
// with upstream's type names, which nodelet's types do not have.
func dumpChecksum(typeName string, cp checkpointV2, v3 bool) uint64 {
	entries := cp.Entries
	if entries == nil {
		entries = map[string]map[string]string{}
	}
	s := "(*" + typeName + "){PolicyName:(string)" + cp.PolicyName + " DefaultCPUSet:(string)" + cp.DefaultCPUSet +
		" Entries:" + dump.ForHash(entries)
	if v3 {
		s += " PodEntries:(state.PodCPUAssignments)map[]"
	}
	s += " Checksum:(checksum.Checksum)0}"
	return checksum.OfDump(s)
}

func corruptState(path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete the CPU manager checkpoint file %q before restarting the node agent", err, path)
}

// loadState reads the checkpoint at path (none: an empty state). Its
// policy must be policy, as upstream ("configured policy %q differs from
// state checkpoint policy %q").
func loadState(path, policy string) (*state, error) {
	s := newState(policy)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f checkpointFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, corruptState(path, err)
	}
	data := checkpointData{PolicyName: f.PolicyName, DefaultCPUSet: f.DefaultCPUSet, Entries: f.Entries}
	if f.Data != "" {
		if sum := checksum.String(f.Data); sum != f.DataChecksum {
			return nil, corruptState(path, fmt.Errorf("checkpoint is corrupted (data checksum %d, expected %d)", sum, f.DataChecksum))
		}
		data = checkpointData{}
		if err := json.Unmarshal([]byte(f.Data), &data); err != nil {
			return nil, corruptState(path, err)
		}
	} else if f.Checksum != 0 && !slices.Contains(legacyChecksums(f.checkpointV2), f.Checksum) {
		// An older kubelet's file (v2 or v3, no data): its own checksum.
		return nil, corruptState(path, fmt.Errorf("checkpoint is corrupted (checksum %d matches none of its versions)", f.Checksum))
	}
	if data.PolicyName != policy {
		return nil, corruptState(path, fmt.Errorf("configured policy %q differs from state checkpoint policy %q", policy, data.PolicyName))
	}
	if s.defaultSet, err = cpuset.Parse(data.DefaultCPUSet); err != nil {
		return nil, corruptState(path, fmt.Errorf("could not parse default CPU set %q: %w", data.DefaultCPUSet, err))
	}
	for uid, cs := range data.Entries {
		for name, str := range cs {
			set, err := cpuset.Parse(str)
			if err != nil {
				return nil, corruptState(path, fmt.Errorf("could not parse cpuset %q for container %q in pod %q: %w", str, name, uid, err))
			}
			s.set(uid, name, set)
		}
	}
	return s, nil
}

// encode is the checkpoint of s, as upstream v1.37 writes it.
func (s *state) encode() ([]byte, error) {
	data := checkpointData{PolicyName: s.policy, DefaultCPUSet: s.defaultSet.String(), Entries: map[string]map[string]string{}}
	for uid, cs := range s.assignments {
		data.Entries[uid] = map[string]string{}
		for name, set := range cs {
			data.Entries[uid][name] = set.String()
		}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	f := checkpointFile{checkpointV2: checkpointV2{PolicyName: data.PolicyName, DefaultCPUSet: data.DefaultCPUSet, Entries: maps.Clone(data.Entries)},
		Data: string(raw), DataChecksum: checksum.String(string(raw))}
	f.Checksum = v2Checksum(f.checkpointV2)
	return json.Marshal(f)
}

// store writes s to path (a new file renamed over the old one).
func (s *state) store(path string) error {
	if path == "" {
		return nil
	}
	out, err := s.encode()
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, out, 0o600)
}
