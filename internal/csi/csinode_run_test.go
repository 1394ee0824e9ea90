package csi

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// RunCSINode waits for the Node to be registered, then creates the CSINode
// and returns.
func TestRunCSINode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}})
		registered := make(chan struct{})
		a := &APINodeInfo{Client: client, NodeName: "n1", Registered: registered}
		done := make(chan error)
		go func() { done <- a.RunCSINode(t.Context()) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, err := client.StorageV1().CSINodes().Get(t.Context(), "n1", metav1.GetOptions{}); err == nil {
			t.Fatal("CSINode created before the Node was registered")
		}
		close(registered)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c, err := client.StorageV1().CSINodes().Get(t.Context(), "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.OwnerReferences) == 0 && len(c.Annotations) == 0 {
			t.Errorf("CSINode %+v has neither owner nor migration annotation", c)
		}
	})
}
