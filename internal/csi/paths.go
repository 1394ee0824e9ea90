package csi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodelet/nodelet/internal/rootdir"
	"k8s.io/apimachinery/pkg/types"
)

// PluginName is the volume plugin's name in paths, as upstream's.
const PluginName = "kubernetes.io/csi"

// VolDataFile is the file beside a staging or publish directory that
// records which volume it is, so that it can be torn down without the
// pod's spec (after a restart).
const VolDataFile = "vol_data.json"

// StagingPath is where a driver with STAGE_UNSTAGE_VOLUME stages a volume,
// as upstream's makeDeviceMountPath:
// <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount.
func StagingPath(root, driver, handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return filepath.Join(rootdir.Dir(root).Plugins(), PluginName, driver, fmt.Sprintf("%x", sum), "globalmount")
}

// PublishPath is where a volume is published for a pod:
// <root>/pods/<uid>/volumes/kubernetes.io~csi/<spec name>/mount (the PV's
// name, or the pod's volume name for an inline volume).
func PublishPath(root, podUID, specName string) string {
	return filepath.Join(rootdir.Dir(root).PodVolumes(types.UID(podUID)), DirName, escapeName(specName), "mount")
}

// BlockStagingPath is where a block volume is staged, as upstream's
// csi_block getStagingPath:
// <root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>.
func BlockStagingPath(root, pv string) string {
	return filepath.Join(rootdir.Dir(root).Plugins(), PluginName, "volumeDevices", "staging", escapeName(pv))
}

// BlockPublishPath is the device file a block volume is published to for
// a pod, as upstream's getPublishPath:
// <root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<podUID>.
func BlockPublishPath(root, pv, podUID string) string {
	return filepath.Join(rootdir.Dir(root).Plugins(), PluginName, "volumeDevices", "publish", escapeName(pv), podUID)
}

// AttachmentID is the VolumeAttachment's name for a volume on a node, as
// upstream's getAttachmentName: csi-<sha256(handle+driver+node)>.
func AttachmentID(handle, driver, node string) string {
	sum := sha256.Sum256([]byte(handle + driver + node))
	return fmt.Sprintf("csi-%x", sum)
}

// escapeName is upstream's EscapeQualifiedName: slashes become "~".
func escapeName(s string) string { return strings.ReplaceAll(s, "/", "~") }

// VolData is vol_data.json, with upstream's keys (publish: all of them;
// staging: volumeHandle and driverName).
type VolData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	// DevicePath is where a block volume is published (nodelet's: it
	// keeps the pod's record under <pod>/volumes, so teardown works from
	// the pod's directory for block volumes too).
	DevicePath string `json:"devicePath,omitempty"`
}

// WriteVolData writes d into dir/vol_data.json.
func WriteVolData(dir string, d VolData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, VolDataFile), b, 0o600)
}

// ReadVolData reads dir/vol_data.json.
func ReadVolData(dir string) (VolData, error) {
	var d VolData
	b, err := os.ReadFile(filepath.Join(dir, VolDataFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", filepath.Join(dir, VolDataFile), err)
	}
	return d, nil
}
