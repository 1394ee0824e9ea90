package csi

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeIDAnnotation(t *testing.T) {
	node := &v1.Node{}
	steps := []struct {
		op, driver, id string
		changed        bool
		want           string // the annotation, "" when absent
	}{
		{"set", "b.csi", "n-b", true, `{"b.csi":"n-b"}`},
		{"set", "a.csi", "n-a", true, `{"a.csi":"n-a","b.csi":"n-b"}`},
		{"set", "a.csi", "n-a", false, `{"a.csi":"n-a","b.csi":"n-b"}`},
		{"remove", "a.csi", "", true, `{"b.csi":"n-b"}`},
		{"remove", "x.csi", "", false, `{"b.csi":"n-b"}`},
		{"remove", "b.csi", "", true, ""},
	}
	for _, s := range steps {
		var changed bool
		var err error
		if s.op == "set" {
			changed, err = SetNodeID(node, s.driver, s.id)
		} else {
			changed, err = RemoveNodeID(node, s.driver)
		}
		got, ok := node.Annotations[AnnotationNodeID]
		if err != nil || changed != s.changed || got != s.want || (s.want == "" && ok) {
			t.Errorf("%s %s: changed %v err %v annotation %q, want %v %q", s.op, s.driver, changed, err, got, s.changed, s.want)
		}
	}
	bad := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationNodeID: "{"}}}
	if _, err := SetNodeID(bad, "a", "b"); err == nil || !strings.Contains(err.Error(), "failed to parse node's") {
		t.Errorf("a broken annotation: %v", err)
	}
}

func TestTopologyLabels(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"zone": "a"}}}
	if changed, err := SetTopologyLabels(node, map[string]string{"zone": "a", "topology.hostpath.csi/node": "n1"}); err != nil || !changed ||
		node.Labels["topology.hostpath.csi/node"] != "n1" {
		t.Errorf("changed %v err %v labels %v", changed, err, node.Labels)
	}
	if changed, err := SetTopologyLabels(node, map[string]string{"zone": "a"}); err != nil || changed {
		t.Errorf("again: changed %v err %v", changed, err)
	}
	_, err := SetTopologyLabels(node, map[string]string{"zone": "b"})
	if err == nil || err.Error() != `detected topology value collision: driver reported "zone":"b" but existing label is "zone":"a"` {
		t.Errorf("collision: %v", err)
	}
}

func TestCSINodeDrivers(t *testing.T) {
	c := NewCSINode("n1", "uid-1")
	if ref := c.OwnerReferences; len(ref) != 1 || ref[0].Kind != "Node" || ref[0].UID != "uid-1" || ref[0].APIVersion != "v1" {
		t.Errorf("owner %+v", ref)
	}
	if got := c.Annotations[AnnotationMigratedPlugins]; !strings.HasPrefix(got, "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,") {
		t.Errorf("migrated plugins %q", got)
	}
	count := func(v int32) *storagev1.VolumeNodeResources { return &storagev1.VolumeNodeResources{Count: &v} }
	if !InstallDriver(c, "b.csi", "n1", 10, map[string]string{"z": "1", "a": "2"}) {
		t.Error("install: no change")
	}
	if InstallDriver(c, "b.csi", "n1", 10, map[string]string{"a": "2", "z": "1"}) {
		t.Error("the same install changed it")
	}
	if !InstallDriver(c, "c.csi", "n1", 0, nil) || !InstallDriver(c, "b.csi", "n1-new", 10, map[string]string{"a": "2", "z": "1"}) {
		t.Error("a second driver or a new node ID: no change")
	}
	want := []storagev1.CSINodeDriver{
		{Name: "c.csi", NodeID: "n1", TopologyKeys: []string{}},
		{Name: "b.csi", NodeID: "n1-new", TopologyKeys: []string{"a", "z"}, Allocatable: count(10)},
	}
	if !reflect.DeepEqual(c.Spec.Drivers, want) {
		t.Errorf("drivers %+v, want %+v", c.Spec.Drivers, want)
	}
	if !UninstallDriver(c, "b.csi") || UninstallDriver(c, "b.csi") || len(c.Spec.Drivers) != 1 {
		t.Errorf("uninstall: %+v", c.Spec.Drivers)
	}
}
