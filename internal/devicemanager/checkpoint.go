package devicemanager

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// CheckpointFile is the checkpoint's name in the device plugins folder
// (upstream's is kubelet_internal_checkpoint, in a format of its own).
const CheckpointFile = "nodelet_internal_checkpoint"

// checkpointData is what a restart needs: every container's devices and
// the plugin's answer for them, and the devices each resource had.
type checkpointData struct {
	Entries    []checkpointEntry   `json:"entries"`
	Registered map[string][]string `json:"registeredDevices"`
}

type checkpointEntry struct {
	PodUID    string   `json:"podUID"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"deviceIDs"`
	// AllocResp is the plugin's ContainerAllocateResponse, protobuf.
	AllocResp []byte `json:"allocResp"`
}

type checkpointFile struct {
	Data     json.RawMessage `json:"data"`
	Checksum string          `json:"checksum"`
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// writeCheckpoint writes the state atomically (a new file renamed over the
// old one).
func writeCheckpoint(path string, a allocations, registered map[string][]string) error {
	d := checkpointData{Registered: registered}
	for _, uid := range sortedKeys(a) {
		for _, c := range sortedKeys(a[uid]) {
			for _, r := range sortedKeys(a[uid][c]) {
				e := a[uid][c][r]
				resp, err := proto.Marshal(e.Resp)
				if err != nil {
					return err
				}
				d.Entries = append(d.Entries, checkpointEntry{PodUID: uid, Container: c, Resource: r, DeviceIDs: e.IDs, AllocResp: resp})
			}
		}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	b, err := json.Marshal(checkpointFile{Data: data, Checksum: checksum(data)})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// readCheckpoint reads what writeCheckpoint wrote; no file is no state.
func readCheckpoint(path string) (allocations, map[string][]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return allocations{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var f checkpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", filepath.Base(path), err)
	}
	if checksum(f.Data) != f.Checksum {
		return nil, nil, fmt.Errorf("checkpoint %s is corrupt (checksum mismatch)", filepath.Base(path))
	}
	var d checkpointData
	if err := json.Unmarshal(f.Data, &d); err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", filepath.Base(path), err)
	}
	a := allocations{}
	for _, e := range d.Entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", filepath.Base(path), err)
		}
		a.set(e.PodUID, e.Container, e.Resource, &entry{IDs: e.DeviceIDs, Resp: resp})
	}
	return a, d.Registered, nil
}
