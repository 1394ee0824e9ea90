package kuberuntime

import (
	"strings"
	"testing"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRuntimeClassHandlers(t *testing.T) {
	lookup := RuntimeClassHandlers(fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}))
	if h, err := lookup(t.Context(), "gvisor"); err != nil || h != "runsc" {
		t.Errorf("gvisor: %q %v, want runsc", h, err)
	}
	if _, err := lookup(t.Context(), "kata"); err == nil || !strings.Contains(err.Error(), `RuntimeClass "kata" not found`) {
		t.Errorf("a missing class: %v", err)
	}
}
