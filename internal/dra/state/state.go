// Package state is the DRA manager's checkpoint, upstream's
// pkg/kubelet/cm/dra/state: the claims prepared on the node, their pods
// and their drivers' devices, in <root-dir>/dra_manager_state with the
// same JSON and checksum, so that a node moved between the upstream
// kubelet and nodelet keeps (and can unprepare) its prepared claims.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// FileName is the checkpoint's name in the root directory, as upstream.
const FileName = "dra_manager_state"

// The checkpoint's kind and version, upstream's.
const (
	CheckpointAPIGroup   = "checkpoint.dra.kubelet.k8s.io"
	CheckpointKind       = "DRACheckpoint"
	CheckpointAPIVersion = CheckpointAPIGroup + "/v1"
)

// ClaimInfoStateList are the prepared claims.
type ClaimInfoStateList []ClaimInfoState

// ClaimInfoState is one prepared claim: its pods and, per driver with
// allocation results in it, the devices the driver prepared.
type ClaimInfoState struct {
	ClaimUID    types.UID
	ClaimName   string
	Namespace   string
	PodUIDs     sets.Set[string]
	DriverState map[string]DriverState
}

// DriverState is a driver's devices of a claim, and the node operations
// its allocation lets the kubelet skip.
type DriverState struct {
	Devices            []Device
	SkipNodeOperations []resourceapi.SkipNodeOperation `json:"skipNodeOperations,omitempty"`
}

// Skips reports whether op (or every operation) is skipped.
func (s DriverState) Skips(op resourceapi.SkipNodeOperation) bool {
	return slices.Contains(s.SkipNodeOperations, resourceapi.SkipNodeOperationAll) ||
		slices.Contains(s.SkipNodeOperations, op)
}

// Device is a prepared device as its driver described it: RequestNames,
// ShareID and CDI device IDs are optional.
type Device struct {
	PoolName     string
	DeviceName   string
	ShareID      *types.UID
	RequestNames []string
	CDIDeviceIDs []string
}

// Checkpoint is the file: Data is the JSON of CheckpointData, Checksum
// its CRC-32 (IEEE).
type Checkpoint struct {
	Data     string
	Checksum uint32
}

// CheckpointData is the checkpoint's content.
type CheckpointData struct {
	metav1.TypeMeta
	ClaimInfoStateList ClaimInfoStateList
}

// ErrCorrupt is a checkpoint whose checksum does not match its data.
var ErrCorrupt = errors.New("checkpoint is corrupted")

// NewCheckpoint is the checkpoint of list.
func NewCheckpoint(list ClaimInfoStateList) (*Checkpoint, error) {
	data, err := json.Marshal(&CheckpointData{
		TypeMeta:           metav1.TypeMeta{Kind: CheckpointKind, APIVersion: CheckpointAPIVersion},
		ClaimInfoStateList: list,
	})
	if err != nil {
		return nil, err
	}
	return &Checkpoint{Data: string(data), Checksum: crc32.ChecksumIEEE(data)}, nil
}

// Parse reads a checkpoint file's content, its checksum verified.
func Parse(blob []byte) (ClaimInfoStateList, error) {
	var cp Checkpoint
	if err := json.Unmarshal(blob, &cp); err != nil {
		return nil, err
	}
	if want := crc32.ChecksumIEEE([]byte(cp.Data)); want != cp.Checksum {
		return nil, fmt.Errorf("%w (checksum %d, expected %d)", ErrCorrupt, cp.Checksum, want)
	}
	var data CheckpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return nil, err
	}
	return data.ClaimInfoStateList, nil
}

// Load reads dir's checkpoint; a missing file is an empty list, written
// then (upstream's GetOrCreate).
func Load(dir string) (ClaimInfoStateList, error) {
	blob, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, Store(dir, nil)
	}
	if err != nil {
		return nil, err
	}
	list, err := Parse(blob)
	if err != nil {
		return nil, fmt.Errorf("failed to get checkpoint %s: %w", FileName, err)
	}
	return list, nil
}

// Store writes list as dir's checkpoint, atomically.
func Store(dir string, list ClaimInfoStateList) error {
	cp, err := NewCheckpoint(list)
	if err != nil {
		return err
	}
	blob, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, FileName), blob, 0o600); err != nil {
		return fmt.Errorf("could not save checkpoint %s: %w", FileName, err)
	}
	return nil
}
