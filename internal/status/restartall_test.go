package status

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestCarryOver(t *testing.T) {
	term := func(code int32) *v1.ContainerStateTerminated {
		return &v1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}
	}
	ran := &v1.ContainerStatus{ContainerID: "containerd://a", RestartCount: 2,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, LastTerminationState: v1.ContainerState{Terminated: term(1)}}
	exited := &v1.ContainerStatus{ContainerID: "containerd://a", RestartCount: 0, State: v1.ContainerState{Terminated: term(42)}}
	waiting := &v1.ContainerStatus{RestartCount: 3, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonRestartingAllContainers}},
		LastTerminationState: v1.ContainerState{Terminated: term(137)}}
	fresh := func() v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	}
	newRun := func() v1.ContainerStatus {
		return v1.ContainerStatus{ContainerID: "containerd://b", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	}
	removed := v1.ContainerStateTerminated{Reason: ReasonRestartingAllContainers, Message: msgRestartingAllContainers, ExitCode: 137}
	tests := []struct {
		name         string
		s            v1.ContainerStatus
		old          *v1.ContainerStatus
		inRuntime    bool
		restartedAll bool
		wantRestarts int32
		wantState    string // waiting reason, or "running"
		wantLast     *v1.ContainerStateTerminated
	}{
		{name: "no old status", s: fresh(), wantState: "PodInitializing"},
		{name: "removed by the reset (was running)", s: fresh(), old: ran, restartedAll: true,
			wantRestarts: 3, wantState: ReasonRestartingAllContainers, wantLast: &removed},
		{name: "removed by the reset (the source, exited)", s: fresh(), old: exited, restartedAll: true,
			wantRestarts: 1, wantState: ReasonRestartingAllContainers, wantLast: &removed},
		{name: "gone, waiting already: kept", s: fresh(), old: waiting, wantRestarts: 3, wantState: "PodInitializing", wantLast: term(137)},
		{name: "new instance after the reset", s: newRun(), old: waiting, inRuntime: true, wantRestarts: 3, wantState: "running", wantLast: term(137)},
		{name: "new instance, the old one reported exited", s: newRun(), old: exited, inRuntime: true, wantState: "running", wantLast: term(42)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			carryOver(&s, tt.old, tt.inRuntime, tt.restartedAll)
			state := "running"
			if s.State.Waiting != nil {
				state = s.State.Waiting.Reason
			}
			if s.RestartCount != tt.wantRestarts || state != tt.wantState || !reflect.DeepEqual(s.LastTerminationState.Terminated, tt.wantLast) {
				t.Errorf("got restarts %d, state %s, last %+v; want %d, %s, %+v", s.RestartCount, state, s.LastTerminationState.Terminated,
					tt.wantRestarts, tt.wantState, tt.wantLast)
			}
		})
	}
}
