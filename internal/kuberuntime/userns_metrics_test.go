package kuberuntime

import (
	"testing"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func TestSyncFailed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		waiting map[string]kubecontainer.Waiting
		want    bool
	}{
		{"nothing waits", nil, false},
		{"waiting its turn", map[string]kubecontainer.Waiting{"a": {Reason: kubecontainer.ReasonContainerCreating}, "b": {Reason: kubecontainer.ReasonPodInitializing}}, false},
		{"could not start", map[string]kubecontainer.Waiting{"a": {Reason: kubecontainer.ReasonContainerCreating}, "b": {Reason: "RunContainerError", Message: "exec: bogus"}}, true},
		{"could not be created", map[string]kubecontainer.Waiting{"a": {Reason: kubecontainer.ReasonCreateContainerError}}, true},
	} {
		if got := syncFailed(kubecontainer.SyncResult{Waiting: tt.waiting}); got != tt.want {
			t.Errorf("%s: syncFailed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
