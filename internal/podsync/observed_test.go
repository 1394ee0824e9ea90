package podsync

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/pleg"
)

func TestObservedDropsOnlyWhatTheSyncSaw(t *testing.T) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING.String()
	exited := runtimeapi.ContainerState_CONTAINER_EXITED.String()
	ready := runtimeapi.PodSandboxState_SANDBOX_READY.String()
	notReady := runtimeapi.PodSandboxState_SANDBOX_NOTREADY.String()
	rs := &kubecontainer.PodStatus{
		UID:       "p1",
		Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*kubecontainer.ContainerStatus{
			{ID: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			// An init container that had already finished when the sync
			// read the runtime after starting it.
			{ID: "i1", State: runtimeapi.ContainerState_CONTAINER_EXITED},
		},
	}
	cases := []struct {
		name   string
		forget bool
		event  pleg.Event
		want   bool
	}{
		{"container started, as the sync saw", false, pleg.Event{ID: "p1", Type: pleg.ContainerStarted, Data: "c1", State: running}, true},
		{"sandbox ready, as the sync saw", false, pleg.Event{ID: "p1", Type: pleg.SandboxChanged, Data: "s1", State: ready}, true},
		{"container died after the sync", false, pleg.Event{ID: "p1", Type: pleg.ContainerDied, Data: "c1", State: exited}, false},
		{"sandbox stopped after the sync", false, pleg.Event{ID: "p1", Type: pleg.SandboxChanged, Data: "s1", State: notReady}, false},
		{"container the sync did not see", false, pleg.Event{ID: "p1", Type: pleg.ContainerStarted, Data: "c2", State: running}, false},
		{"container exited before the sync's second read", false, pleg.Event{ID: "p1", Type: pleg.ContainerDied, Data: "i1", State: exited}, false},
		{"removed", false, pleg.Event{ID: "p1", Type: pleg.ContainerRemoved, Data: "c1"}, false},
		{"another pod", false, pleg.Event{ID: "p2", Type: pleg.ContainerStarted, Data: "c1", State: running}, false},
		{"pod stopping: forgotten", true, pleg.Event{ID: "p1", Type: pleg.ContainerStarted, Data: "c1", State: running}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o observed
			o.record(rs)
			if tc.forget {
				o.forget("p1")
			}
			if got := o.redundant(&tc.event); got != tc.want {
				t.Errorf("redundant(%+v) = %v, want %v", tc.event, got, tc.want)
			}
		})
	}
}
