package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConditions(t *testing.T) {
	yes, no := true, false
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	failed := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	done := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	withInit := pod(v1.RestartPolicyAlways, "run1")
	withInit.Spec.InitContainers = []v1.Container{{Name: "init1"}, {Name: "init2"}}
	sidecar := pod(v1.RestartPolicyAlways, "main")
	always := v1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always}}
	gated := pod(v1.RestartPolicyAlways, "a")
	gated.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	tests := []struct {
		name       string
		pod        *v1.Pod
		statuses   []v1.ContainerStatus
		conditions []v1.PodCondition
		phase      v1.PodPhase
		want       map[v1.PodConditionType]v1.PodCondition
	}{
		{"init containers failing", withInit, []v1.ContainerStatus{
			{Name: "init1", State: failed}, {Name: "init2", State: waiting}, {Name: "run1", State: waiting}}, nil, v1.PodPending,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [init1 init2]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [run1]"},
				v1.PodReady:        {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [run1]"},
			}},
		{"first init done, pod failed", withInit, []v1.ContainerStatus{
			{Name: "init1", State: done, Ready: true}, {Name: "init2", State: failed}, {Name: "run1", State: waiting}}, nil, v1.PodFailed,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [init2]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "PodFailed"},
				v1.PodReady:        {Status: v1.ConditionFalse, Reason: "PodFailed"},
			}},
		{"succeeded", withInit, []v1.ContainerStatus{
			{Name: "init1", State: done, Ready: true}, {Name: "init2", State: done, Ready: true}, {Name: "run1", State: done}}, nil, v1.PodSucceeded,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionTrue, Reason: "PodCompleted"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "PodCompleted"},
			}},
		{"sidecar not started yet", sidecar, []v1.ContainerStatus{
			{Name: "side", State: running, Started: &no}, {Name: "main", State: waiting}}, nil, v1.PodPending,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "ContainersNotInitialized", Message: "containers with incomplete status: [side]"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [side main]"},
			}},
		{"sidecar restarting after the app started", sidecar, []v1.ContainerStatus{
			{Name: "side", State: waiting, Started: &no}, {Name: "main", State: running, Ready: true, Started: &yes}}, nil, v1.PodRunning,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionTrue},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [side]"},
			}},
		{"readiness gate missing", gated, []v1.ContainerStatus{{Name: "a", State: running, Ready: true}}, nil, v1.PodRunning,
			map[v1.PodConditionType]v1.PodCondition{
				v1.ContainersReady: {Status: v1.ConditionTrue},
				v1.PodReady: {Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady",
					Message: `corresponding condition of pod readiness gate "example.com/gate" does not exist.`},
			}},
		{"readiness gate True", gated, []v1.ContainerStatus{{Name: "a", State: running, Ready: true}},
			[]v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}, v1.PodRunning,
			map[v1.PodConditionType]v1.PodCondition{v1.PodReady: {Status: v1.ConditionTrue}}},
		{"no statuses", withInit, nil, nil, v1.PodPending,
			map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  {Status: v1.ConditionFalse, Reason: "UnknownContainerStatuses"},
				v1.ContainersReady: {Status: v1.ConditionFalse, Reason: "UnknownContainerStatuses"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[v1.PodConditionType]v1.PodCondition{
				v1.PodInitialized:  InitializedCondition(tt.pod, tt.statuses, tt.phase),
				v1.ContainersReady: ContainersReadyCondition(tt.pod, tt.statuses, tt.phase),
				v1.PodReady:        PodReadyCondition(tt.pod, tt.conditions, tt.statuses, tt.phase),
			}
			for typ, want := range tt.want {
				g := got[typ]
				if g.Type != typ || g.Status != want.Status || g.Reason != want.Reason || g.Message != want.Message {
					t.Errorf("%s: %+v, want %+v", typ, g, want)
				}
			}
		})
	}
}

func TestNotReadyWhenTerminal(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), time.Unix(200, 0)
	running := func(phase v1.PodPhase) v1.PodStatus {
		return v1.PodStatus{Phase: phase,
			ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true}},
			Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: t0},
			}}
	}
	for _, tc := range []struct {
		phase  v1.PodPhase
		ready  v1.ConditionStatus
		reason string
	}{
		{v1.PodRunning, v1.ConditionTrue, ""},
		{v1.PodFailed, v1.ConditionFalse, ReasonPodFailed},
		{v1.PodSucceeded, v1.ConditionFalse, ReasonPodCompleted},
	} {
		st := running(tc.phase)
		NotReadyWhenTerminal(&st, t1)
		for _, c := range st.Conditions[:2] {
			if c.Status != tc.ready || c.Reason != tc.reason {
				t.Errorf("%s: %s %s %q, want %s %q", tc.phase, c.Type, c.Status, c.Reason, tc.ready, tc.reason)
			}
			if tc.ready == v1.ConditionFalse && !c.LastTransitionTime.Time.Equal(t1) {
				t.Errorf("%s: %s transition %v", tc.phase, c.Type, c.LastTransitionTime)
			}
		}
		if st.Conditions[2].Status != v1.ConditionTrue {
			t.Errorf("%s: Initialized changed", tc.phase)
		}
		if st.ContainerStatuses[0].Ready != (tc.ready == v1.ConditionTrue) {
			t.Errorf("%s: container ready %v", tc.phase, st.ContainerStatuses[0].Ready)
		}
	}
}
