package csi

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAPINodeInfo(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}})
	a := &APINodeInfo{Client: client, NodeName: "n1"}
	if err := a.Install(ctx, "hostpath.csi", "n1", 5, map[string]string{"topology.hostpath/node": "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Install(ctx, "other.csi", "o-1", 0, nil); err != nil {
		t.Fatal(err)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := node.Annotations[AnnotationNodeID]; got != `{"hostpath.csi":"n1","other.csi":"o-1"}` || node.Labels["topology.hostpath/node"] != "n1" {
		t.Errorf("node annotation %q labels %v", got, node.Labels)
	}
	c, err := client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Spec.Drivers) != 2 || c.Spec.Drivers[0].Name != "hostpath.csi" || *c.Spec.Drivers[0].Allocatable.Count != 5 || c.OwnerReferences[0].UID != "uid-n1" {
		t.Errorf("CSINode %+v", c)
	}
	if err := a.Uninstall(ctx, "hostpath.csi"); err != nil {
		t.Fatal(err)
	}
	node, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	c, _ = client.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if got := node.Annotations[AnnotationNodeID]; got != `{"other.csi":"o-1"}` || len(c.Spec.Drivers) != 1 || c.Spec.Drivers[0].Name != "other.csi" {
		t.Errorf("after uninstall: annotation %q drivers %+v", got, c.Spec.Drivers)
	}
}
