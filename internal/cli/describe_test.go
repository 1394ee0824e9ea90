package cli

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestNotReady(t *testing.T) {
	unhealthy := v1.Event{Reason: "Unhealthy", Message: "Readiness probe failed: nope", InvolvedObject: v1.ObjectReference{FieldPath: "spec.containers{c}"}}
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		events []v1.Event
		want   string
	}{
		{"ready", pod("p", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}), nil, ""},
		{"image pull", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"x\""}}}}
		}), nil, `container c is waiting: ImagePullBackOff: Back-off pulling image "x"`},
		{"crash loop", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 3,
				State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=c"}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
		}), nil, "container c keeps crashing: restarted 3 times, last exit code 3 (Error); back-off 40s restarting failed container=c"},
		{"readiness", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
			p.Status.ContainerStatuses[0].Started = ptr.To(true)
		}), []v1.Event{unhealthy}, "container c is running but not ready: Readiness probe failed: nope"},
		{"init crash first", pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i"}}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", RestartCount: 1, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		}), nil, "init container i keeps crashing: restarted 1 times"},
		{"rejected", pod("p", func(p *v1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = v1.PodFailed, "OutOfcpu", "Node didn't have enough resource: cpu"
		}), nil, "the pod has finished (Failed): OutOfcpu: Node didn't have enough resource: cpu"},
		{"volumes", pod("p", nil), []v1.Event{{Reason: "FailedMount", Message: `configmap "x" not found`}}, `its volumes are not ready: configmap "x" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notReady(tc.pod, tc.events); got != tc.want {
				t.Fatalf("notReady = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	p := pod("web", func(p *v1.Pod) {
		p.Spec.Containers[0].Image = "busybox"
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
	})
	var b bytes.Buffer
	if err := describe(&b, p, []v1.Event{{Type: "Warning", Reason: "Unhealthy", Message: "Readiness probe failed: ", InvolvedObject: v1.ObjectReference{FieldPath: "spec.containers{c}"}}}, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "web", "Not Ready:", "container c is running but not ready: Readiness probe failed:",
		"Readiness:", "exec [false] delay=0s timeout=1s period=1s #success=1 #failure=3", "data:", "EmptyDir", "Events:", "Unhealthy"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}
