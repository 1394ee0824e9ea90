package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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

func TestRequestsRRO(t *testing.T) {
	mount := func(mode *v1.RecursiveReadOnlyMode) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i", VolumeMounts: []v1.VolumeMount{{Name: "v", RecursiveReadOnly: mode}}}}}}
	}
	for _, tt := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no mounts", &v1.Pod{}, false},
		{"unset", mount(nil), false},
		{"Disabled", mount(ptr.To(v1.RecursiveReadOnlyDisabled)), false},
		{"IfPossible in an init container", mount(ptr.To(v1.RecursiveReadOnlyIfPossible)), true},
		{"Enabled", mount(ptr.To(v1.RecursiveReadOnlyEnabled)), true},
	} {
		if got := requestsRRO(tt.pod); got != tt.want {
			t.Errorf("%s: requestsRRO = %v, want %v", tt.name, got, tt.want)
		}
	}
}
