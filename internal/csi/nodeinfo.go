package csi

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Node annotation with each CSI driver's node ID (a JSON map), and the
// CSINode annotation listing the in-tree plugins migrated to CSI, as
// upstream.
const (
	AnnotationNodeID          = "csi.volume.kubernetes.io/nodeid"
	AnnotationMigratedPlugins = "storage.alpha.kubernetes.io/migrated-plugins"
)

// MigratedPlugins are the in-tree plugins upstream v1.37 reports migrated
// (all of them are, their CSI migration being GA).
var MigratedPlugins = []string{
	"kubernetes.io/aws-ebs", "kubernetes.io/azure-disk", "kubernetes.io/azure-file", "kubernetes.io/cinder",
	"kubernetes.io/gce-pd", "kubernetes.io/portworx-volume", "kubernetes.io/vsphere-volume",
}

// nodeIDs is the Node's driver -> node ID map.
func nodeIDs(node *v1.Node) (map[string]string, error) {
	m := map[string]string{}
	if s := node.Annotations[AnnotationNodeID]; s != "" {
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, fmt.Errorf("failed to parse node's %q annotation value (%q) err=%v", AnnotationNodeID, s, err)
		}
	}
	return m, nil
}

// SetNodeID records driver's node ID in the Node's annotation; it tells
// whether the Node changed.
func SetNodeID(node *v1.Node, driver, id string) (bool, error) {
	m, err := nodeIDs(node)
	if err != nil {
		return false, err
	}
	if cur, ok := m[driver]; ok && cur == id {
		return false, nil
	}
	m[driver] = id
	b, _ := json.Marshal(m)
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationNodeID] = string(b)
	return true, nil
}

// RemoveNodeID drops driver from the annotation (the annotation with its
// last driver).
func RemoveNodeID(node *v1.Node, driver string) (bool, error) {
	m, err := nodeIDs(node)
	if err != nil {
		return false, err
	}
	if _, ok := m[driver]; !ok {
		return false, nil
	}
	delete(m, driver)
	if len(m) == 0 {
		delete(node.Annotations, AnnotationNodeID)
		return true, nil
	}
	b, _ := json.Marshal(m)
	node.Annotations[AnnotationNodeID] = string(b)
	return true, nil
}

// SetTopologyLabels puts the driver's topology on the Node as labels; a
// label the Node has with another value is an error, as upstream.
func SetTopologyLabels(node *v1.Node, topology map[string]string) (bool, error) {
	for k, v := range topology {
		if cur, ok := node.Labels[k]; ok && cur != v {
			return false, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur)
		}
	}
	changed := false
	for k, v := range topology {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		if node.Labels[k] != v {
			node.Labels[k] = v
			changed = true
		}
	}
	return changed, nil
}

// NewCSINode is the node's CSINode, owned by its Node, no drivers yet.
func NewCSINode(nodeName string, nodeUID types.UID) *storagev1.CSINode {
	c := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name:            nodeName,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: nodeUID}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	SetMigrationAnnotation(c)
	return c
}

// SetMigrationAnnotation keeps the CSINode's migrated-plugins annotation
// (sorted, comma-separated); it tells whether it changed.
func SetMigrationAnnotation(c *storagev1.CSINode) bool {
	plugins := slices.Clone(MigratedPlugins)
	sort.Strings(plugins)
	want := strings.Join(plugins, ",")
	if c.Annotations[AnnotationMigratedPlugins] == want {
		return false
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationMigratedPlugins] = want
	return true
}

// InstallDriver puts the driver in the CSINode's spec (node ID, sorted
// topology keys, the attach limit when positive); it tells whether the
// CSINode changed.
func InstallDriver(c *storagev1.CSINode, driver, nodeID string, maxVolumes int64, topology map[string]string) bool {
	keys := make([]string, 0, len(topology))
	for k := range topology {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := storagev1.CSINodeDriver{Name: driver, NodeID: nodeID, TopologyKeys: keys}
	if maxVolumes > 0 {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: ptrInt32(int32(min(maxVolumes, math.MaxInt32)))}
	}
	changed := SetMigrationAnnotation(c)
	drivers := make([]storagev1.CSINodeDriver, 0, len(c.Spec.Drivers)+1)
	same := false
	for _, cur := range c.Spec.Drivers {
		if cur.Name != driver {
			drivers = append(drivers, cur)
			continue
		}
		same = cur.NodeID == nodeID && slices.Equal(sortedCopy(cur.TopologyKeys), keys) && sameCount(cur.Allocatable, d.Allocatable)
	}
	if same {
		return changed
	}
	c.Spec.Drivers = append(drivers, d)
	return true
}

// UninstallDriver drops the driver from the CSINode's spec.
func UninstallDriver(c *storagev1.CSINode, driver string) bool {
	n := len(c.Spec.Drivers)
	c.Spec.Drivers = slices.DeleteFunc(c.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
	return len(c.Spec.Drivers) != n
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

func sameCount(a, b *storagev1.VolumeNodeResources) bool {
	count := func(r *storagev1.VolumeNodeResources) int32 {
		if r == nil || r.Count == nil {
			return 0
		}
		return *r.Count
	}
	return count(a) == count(b)
}

func ptrInt32(v int32) *int32 { return &v }
