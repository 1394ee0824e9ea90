package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/kubecontainer"
)

func TestLogID(t *testing.T) {
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	exited := func(id string) *v1.ContainerStateTerminated {
		return &v1.ContainerStateTerminated{ExitCode: 1, ContainerID: id}
	}
	waiting := func(reason string) v1.ContainerState {
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}
	}
	for _, tc := range []struct {
		name     string
		status   v1.ContainerStatus
		previous bool
		want     string // the ID, or a part of the error
	}{
		{"running", v1.ContainerStatus{Name: "c", ContainerID: "containerd://run1", State: running}, false, "run1"},
		{"running, previous asked", v1.ContainerStatus{Name: "c", ContainerID: "containerd://run2", State: running,
			LastTerminationState: v1.ContainerState{Terminated: exited("containerd://old1")}}, true, "old1"},
		{"running, no previous", v1.ContainerStatus{Name: "c", ContainerID: "containerd://run2", State: running}, true,
			`previous terminated container "c" in pod "p" not found`},
		{"terminated", v1.ContainerStatus{Name: "c", State: v1.ContainerState{Terminated: exited("containerd://done")}}, false, "done"},
		{"back-off after a crash", v1.ContainerStatus{Name: "c", State: waiting("CrashLoopBackOff"),
			LastTerminationState: v1.ContainerState{Terminated: exited("containerd://crashed")}}, false, "crashed"},
		{"terminated without an ID", v1.ContainerStatus{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}}}, false,
			`container "c" in pod "p" is terminated`},
		{"image pull failing", v1.ContainerStatus{Name: "c", State: waiting("ErrImagePull")}, false,
			`container "c" in pod "p" is waiting to start: image can't be pulled`},
		{"image pull back-off", v1.ContainerStatus{Name: "c", State: waiting("ImagePullBackOff")}, false,
			"is waiting to start: trying and failing to pull image"},
		{"created", v1.ContainerStatus{Name: "c", State: waiting("ContainerCreating")}, false, "is waiting to start: ContainerCreating"},
		{"not in the status yet", v1.ContainerStatus{Name: "other"}, false, `container "c" in pod "p" is waiting to start: ContainerCreating`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{}
			pod.Name = "p"
			pod.Status.ContainerStatuses = []v1.ContainerStatus{tc.status}
			id, err := logID(pod, "c", tc.previous)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q, want %q", err, tc.want)
				}
				return
			}
			if id != tc.want {
				t.Errorf("id %q, want %q", id, tc.want)
			}
		})
	}
}

// fakePodRuntime answers GetPodStatus with status.
type fakePodRuntime struct{ status *kubecontainer.PodStatus }

func (f fakePodRuntime) GetPodStatus(context.Context, types.UID, string, string) (*kubecontainer.PodStatus, error) {
	return f.status, nil
}
func (f fakePodRuntime) BackoffDelay(*v1.Pod, *v1.Container, time.Time) (time.Duration, bool) {
	return 0, false
}

func TestRuntimeLookups(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u1"
	s := &Server{cfg: Config{PodRuntime: fakePodRuntime{&kubecontainer.PodStatus{
		Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "sb2", State: runtimeapi.PodSandboxState_SANDBOX_READY}, {Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
		Containers: []*kubecontainer.ContainerStatus{
			{ID: "new", Name: "app", State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			{ID: "old", Name: "app", State: runtimeapi.ContainerState_CONTAINER_EXITED},
			{ID: "gone", Name: "side", State: runtimeapi.ContainerState_CONTAINER_EXITED},
		},
	}}}}
	if id, err := s.runningContainerID(t.Context(), pod, "app"); err != nil || id != "new" {
		t.Errorf("running app: %q %v, want new", id, err)
	}
	if _, err := s.runningContainerID(t.Context(), pod, "side"); err == nil {
		t.Error("an exited container taken for running")
	}
	if id, err := s.sandboxID(t.Context(), pod); err != nil || id != "sb2" {
		t.Errorf("sandbox: %q %v, want sb2", id, err)
	}
	s.cfg.PodRuntime = fakePodRuntime{&kubecontainer.PodStatus{Sandboxes: []*runtimeapi.PodSandboxStatus{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}}}
	if _, err := s.sandboxID(t.Context(), pod); err == nil || !strings.Contains(err.Error(), "no running sandbox") {
		t.Errorf("a stopped sandbox: %v", err)
	}
}

// /runningpods/ lists the pods the last relist found running, with their
// running containers only.
func TestRunningPods(t *testing.T) {
	listed := false
	var relist []*kubecontainer.RunningPod
	s := &Server{cfg: Config{Relisted: func() ([]*kubecontainer.RunningPod, bool) { return relist, listed }}}
	if _, err := s.runningPods(); err == nil {
		t.Error("no error before the first relist")
	}
	listed = true
	ready := []*runtimeapi.PodSandbox{{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	ctr := func(name string, st runtimeapi.ContainerState) *runtimeapi.Container {
		return &runtimeapi.Container{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "img-" + name}, State: st}
	}
	relist = []*kubecontainer.RunningPod{
		{UID: "u1", Name: "web", Namespace: "ns", Sandboxes: ready, Containers: []*runtimeapi.Container{
			ctr("app", runtimeapi.ContainerState_CONTAINER_RUNNING), ctr("init", runtimeapi.ContainerState_CONTAINER_EXITED)}},
		{UID: "u2", Name: "stopped", Namespace: "ns", Sandboxes: []*runtimeapi.PodSandbox{{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}},
	}
	got, err := s.runningPods()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].UID != "u1" {
		t.Fatalf("running pods %v, want web only", got)
	}
	var names []string
	for _, c := range got[0].Spec.Containers {
		names = append(names, c.Name+"="+c.Image)
	}
	if !slices.Equal(names, []string{"app=img-app"}) {
		t.Errorf("containers %v, want the running one", names)
	}
}
