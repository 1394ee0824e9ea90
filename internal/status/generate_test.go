package status

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func pod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "p", "default", "u"
	p.Spec.RestartPolicy = policy
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func rc(name string, state runtimeapi.ContainerState, exit int32, restarts int) *kubecontainer.ContainerStatus {
	return &kubecontainer.ContainerStatus{ID: name + "-" + string(rune('0'+restarts)), Name: name, State: state, ExitCode: exit, RestartCount: restarts,
		StartedAt: time.Unix(100, 0), FinishedAt: time.Unix(200, 0)}
}

var ready = []*runtimeapi.PodSandboxStatus{{Id: "s", State: runtimeapi.PodSandboxState_SANDBOX_READY}}

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
)

func TestGeneratePhaseAndStates(t *testing.T) {
	tests := []struct {
		name      string
		pod       *v1.Pod
		rs        *kubecontainer.PodStatus
		waiting   map[string]kubecontainer.Waiting
		wantPhase v1.PodPhase
		wantReady bool
	}{
		{"nothing yet", pod(v1.RestartPolicyAlways, "a"), &kubecontainer.PodStatus{}, nil, v1.PodPending, false},
		{"running", pod(v1.RestartPolicyAlways, "a"), &kubecontainer.PodStatus{Sandboxes: ready, IPs: []string{"10.88.0.2"},
			Containers: []*kubecontainer.ContainerStatus{rc("a", running, 0, 0)}}, nil, v1.PodRunning, true},
		{"crash looping stays Running", pod(v1.RestartPolicyAlways, "a"), &kubecontainer.PodStatus{Sandboxes: ready,
			Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 1, 3)}},
			map[string]kubecontainer.Waiting{"a": {Reason: "CrashLoopBackOff"}}, v1.PodRunning, false},
		{"Never, one failed", pod(v1.RestartPolicyNever, "a", "b"), &kubecontainer.PodStatus{
			Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 1, 0), rc("b", exited, 0, 0)}}, nil, v1.PodFailed, false},
		{"OnFailure, all succeeded", pod(v1.RestartPolicyOnFailure, "a", "b"), &kubecontainer.PodStatus{
			Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 0, 0), rc("b", exited, 0, 0)}}, nil, v1.PodSucceeded, false},
		{"OnFailure, one failed and restarting", pod(v1.RestartPolicyOnFailure, "a"), &kubecontainer.PodStatus{
			Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 2, 0)}}, nil, v1.PodRunning, false},
		{"Never pod, container Always: restarting", func() *v1.Pod {
			p := pod(v1.RestartPolicyNever, "a")
			always := v1.ContainerRestartPolicyAlways
			p.Spec.Containers[0].RestartPolicy = &always
			return p
		}(), &kubecontainer.PodStatus{Sandboxes: ready, Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 0, 0)}}, nil, v1.PodRunning, false},
		{"Always pod, container Never: done", func() *v1.Pod {
			p := pod(v1.RestartPolicyAlways, "a")
			never := v1.ContainerRestartPolicyNever
			p.Spec.Containers[0].RestartPolicy = &never
			return p
		}(), &kubecontainer.PodStatus{Sandboxes: ready, Containers: []*kubecontainer.ContainerStatus{rc("a", exited, 1, 0)}}, nil, v1.PodFailed, false},
		{"image pull failing", pod(v1.RestartPolicyAlways, "a"), &kubecontainer.PodStatus{Sandboxes: ready},
			map[string]kubecontainer.Waiting{"a": {Reason: "ErrImagePull"}}, v1.PodPending, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Generate(Input{Pod: tt.pod, Runtime: tt.rs, Sync: kubecontainer.SyncResult{Waiting: tt.waiting}, Now: time.Unix(300, 0)})
			if st.Phase != tt.wantPhase {
				t.Errorf("phase %s, want %s", st.Phase, tt.wantPhase)
			}
			if c := findCondition(st.Conditions, v1.PodReady); c == nil || (c.Status == v1.ConditionTrue) != tt.wantReady {
				t.Errorf("Ready condition %+v, want ready=%v", c, tt.wantReady)
			}
			for name, w := range tt.waiting {
				for _, cs := range st.ContainerStatuses {
					if cs.Name == name && (cs.State.Waiting == nil || cs.State.Waiting.Reason != w.Reason) {
						t.Errorf("container %s state %+v, want waiting %s", name, cs.State, w.Reason)
					}
				}
			}
		})
	}
}

func TestGenerateLastStateAndNoGoingBack(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, "a")
	rs := &kubecontainer.PodStatus{Sandboxes: ready, Containers: []*kubecontainer.ContainerStatus{rc("a", running, 0, 1), rc("a", exited, 137, 0)}}
	rs.Containers[1].Reason = "OOMKilled"
	st := Generate(Input{Pod: p, Runtime: rs, Now: time.Unix(300, 0), RuntimeName: "containerd"})
	c := st.ContainerStatuses[0]
	if c.RestartCount != 1 || c.State.Running == nil || c.LastTerminationState.Terminated == nil ||
		c.LastTerminationState.Terminated.Reason != "OOMKilled" || c.LastTerminationState.Terminated.ExitCode != 137 {
		t.Errorf("container status %+v", c)
	}
	if c.ContainerID != "containerd://a-1" {
		t.Errorf("container ID %q", c.ContainerID)
	}
	// A terminal phase stays terminal.
	prev := v1.PodStatus{Phase: v1.PodSucceeded}
	if st := Generate(Input{Pod: p, Runtime: rs, Previous: &prev, Now: time.Unix(400, 0)}); st.Phase != v1.PodSucceeded {
		t.Errorf("phase went from Succeeded to %s", st.Phase)
	}
}

// Init containers, as upstream's conformance tests check them: a completed
// init container is ready, and every container the runtime does not have
// yet waits with PodInitializing (ContainerCreating without init
// containers), whether the pod is initializing, crash-looping an init
// container or failed by one.
func TestGenerateInitContainers(t *testing.T) {
	withInit := func(policy v1.RestartPolicy) *v1.Pod {
		p := pod(policy, "run1")
		p.Spec.InitContainers = []v1.Container{{Name: "init1", Image: "busybox"}, {Name: "init2", Image: "busybox"}}
		return p
	}
	tests := []struct {
		name        string
		pod         *v1.Pod
		rs          *kubecontainer.PodStatus
		waiting     map[string]kubecontainer.Waiting
		wantReady   map[string]bool   // init containers
		wantWaiting map[string]string // container -> reason
		wantPhase   v1.PodPhase
	}{
		{"nothing yet", withInit(v1.RestartPolicyAlways), &kubecontainer.PodStatus{}, nil,
			map[string]bool{"init1": false, "init2": false},
			map[string]string{"init1": "PodInitializing", "init2": "PodInitializing", "run1": "PodInitializing"}, v1.PodPending},
		{"first done, second running", withInit(v1.RestartPolicyAlways), &kubecontainer.PodStatus{Sandboxes: ready,
			Containers: []*kubecontainer.ContainerStatus{rc("init1", exited, 0, 0), rc("init2", running, 0, 0)}}, nil,
			map[string]bool{"init1": true, "init2": false}, map[string]string{"run1": "PodInitializing"}, v1.PodPending},
		{"all done", withInit(v1.RestartPolicyNever), &kubecontainer.PodStatus{Sandboxes: ready,
			Containers: []*kubecontainer.ContainerStatus{rc("init1", exited, 0, 0), rc("init2", exited, 0, 0), rc("run1", running, 0, 0)}}, nil,
			map[string]bool{"init1": true, "init2": true}, nil, v1.PodRunning},
		{"first crash looping", withInit(v1.RestartPolicyAlways), &kubecontainer.PodStatus{Sandboxes: ready,
			Containers: []*kubecontainer.ContainerStatus{rc("init1", exited, 1, 2)}},
			map[string]kubecontainer.Waiting{"init1": {Reason: "CrashLoopBackOff"}},
			map[string]bool{"init1": false, "init2": false},
			map[string]string{"init1": "CrashLoopBackOff", "init2": "PodInitializing", "run1": "PodInitializing"}, v1.PodPending},
		{"first failed, Never", withInit(v1.RestartPolicyNever), &kubecontainer.PodStatus{Sandboxes: ready,
			Containers: []*kubecontainer.ContainerStatus{rc("init1", exited, 1, 0)}}, nil,
			map[string]bool{"init1": false, "init2": false},
			map[string]string{"init2": "PodInitializing", "run1": "PodInitializing"}, v1.PodFailed},
		{"no init containers", pod(v1.RestartPolicyAlways, "a"), &kubecontainer.PodStatus{}, nil, nil,
			map[string]string{"a": "ContainerCreating"}, v1.PodPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Generate(Input{Pod: tt.pod, Runtime: tt.rs, Sync: kubecontainer.SyncResult{Waiting: tt.waiting}, Now: time.Unix(300, 0)})
			if st.Phase != tt.wantPhase {
				t.Errorf("phase %s, want %s", st.Phase, tt.wantPhase)
			}
			for _, cs := range st.InitContainerStatuses {
				if want, ok := tt.wantReady[cs.Name]; ok && cs.Ready != want {
					t.Errorf("init container %s ready %v, want %v", cs.Name, cs.Ready, want)
				}
			}
			all := append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...)
			for name, reason := range tt.wantWaiting {
				found := false
				for _, cs := range all {
					if cs.Name != name {
						continue
					}
					found = true
					if cs.State.Waiting == nil || cs.State.Waiting.Reason != reason {
						t.Errorf("container %s state %+v, want waiting %s", name, cs.State, reason)
					}
				}
				if !found {
					t.Errorf("no status for container %s", name)
				}
			}
		})
	}
}

// The kubelet's conditions and the status carry the pod's generation
// (PodObservedGenerationTracking, GA in 1.35); the status's never goes back.
func TestObservedGeneration(t *testing.T) {
	p := pod(v1.RestartPolicyAlways, "a")
	p.Generation = 4
	st := Generate(Input{Pod: p, Runtime: &kubecontainer.PodStatus{Sandboxes: ready,
		Containers: []*kubecontainer.ContainerStatus{rc("a", running, 0, 0)}}, Now: time.Unix(300, 0)})
	if len(st.Conditions) != 5 {
		t.Fatalf("conditions %+v", st.Conditions)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 4 {
			t.Errorf("%s: observedGeneration %d, want 4", c.Type, c.ObservedGeneration)
		}
	}
	s := NewStore()
	ctx := context.Background()
	s.Set(ctx, p, st)
	if got, _ := s.Get(p.UID); got.ObservedGeneration != 4 {
		t.Errorf("status observedGeneration %d, want 4", got.ObservedGeneration)
	}
	older := p.DeepCopy()
	older.Generation = 3
	s.Set(ctx, older, st)
	if got, _ := s.Get(p.UID); got.ObservedGeneration != 4 {
		t.Errorf("status observedGeneration went back to %d", got.ObservedGeneration)
	}
}
