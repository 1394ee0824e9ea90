package userns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// mappingsFile is the name of the file, in the pod's directory, that
// records its user namespace: upstream's name, so pods keep their mappings
// across a switch between the kubelet and nodelet.
const mappingsFile = "userns"

// userNamespace is the content of mappingsFile, upstream's JSON:
//
//	{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],
//	 "gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}
type userNamespace struct {
	// UIDMappings are the UID mappings of the user namespace.
	UIDMappings []idMapping `json:"uidMappings"`
	// GIDMappings are the GID mappings of the user namespace.
	GIDMappings []idMapping `json:"gidMappings"`
}

// idMapping is one mapping of a pod's user namespace.
type idMapping struct {
	HostId      uint32 `json:"hostId"`
	ContainerId uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// errNoRecord is readRecord's error when the pod has no mappingsFile.
var errNoRecord = errors.New("key is not found")

// writeRecord writes userNs to dir/userns as upstream's file store does:
// the directory is made (0755) if missing, the data goes to a temporary
// ".*" file in it that is synced and renamed over the record, and the
// directory is synced so the record survives a crash.
func writeRecord(dir string, userNs userNamespace) error {
	data, err := json.Marshal(userNs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create user namespace store: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, mappingsFile), data); err != nil {
		return err
	}

	parentDir, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := parentDir.Sync(); err != nil {
		parentDir.Close()
		return err
	}
	return parentDir.Close()
}

func writeFileAtomic(path string, data []byte) (retErr error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			_ = tmp.Close()
			if err := os.Remove(tmp.Name()); err != nil && !os.IsNotExist(err) {
				retErr = fmt.Errorf("failed to remove the temporary file (%q) after error %v; remove error: %v", tmp.Name(), retErr, err)
			}
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readRecord reads dir/userns; errNoRecord when there is none. Like
// upstream's file store it makes dir (0755) if it is missing.
func readRecord(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create user namespace store: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, mappingsFile))
	if os.IsNotExist(err) {
		return data, errNoRecord
	}
	return data, err
}

// parseRecord decodes and checks a mappingsFile: it must hold what
// GetOrCreateUserNamespaceMappings writes, one mapping, the same for UIDs
// and GIDs, with container ID 0 (root) mapped. The block it names is
// checked against the manager's range by record.
func parseRecord(content []byte) (userNs userNamespace, err error) {
	if err = json.Unmarshal(content, &userNs); err != nil {
		err = fmt.Errorf("invalid user namespace mappings file: %w", err)
		return
	}
	if len(userNs.UIDMappings) != 1 {
		err = fmt.Errorf("invalid user namespace configuration: no more than one mapping allowed.")
		return
	}
	if len(userNs.UIDMappings) != len(userNs.GIDMappings) {
		err = fmt.Errorf("invalid user namespace configuration: GID and UID mappings should be identical.")
		return
	}
	if userNs.UIDMappings[0] != userNs.GIDMappings[0] {
		err = fmt.Errorf("invalid user namespace configuration: GID and UID mapping should be identical")
		return
	}
	// Upstream never writes a record without root mapped, and some
	// runtimes assume it is.
	if userNs.UIDMappings[0].ContainerId != 0 {
		err = fmt.Errorf("invalid user namespace configuration: UID 0 must be mapped")
		return
	}
	if userNs.GIDMappings[0].ContainerId != 0 {
		err = fmt.Errorf("invalid user namespace configuration: GID 0 must be mapped")
		return
	}
	return userNs, nil
}
