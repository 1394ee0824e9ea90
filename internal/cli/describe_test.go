package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/server"
)

func TestNotReady(t *testing.T) {
	unhealthy := v1.Event{Reason: "Unhealthy", Message: "Readiness probe failed: nope", InvolvedObject: v1.ObjectReference{FieldPath: "spec.containers{c}"}}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		events  []v1.Event
		details server.PodDetails
		want    string
	}{
		{"ready", pod("p", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}), nil, server.PodDetails{}, ""},
		{"image pull", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"x\""}}}}
		}), nil, server.PodDetails{}, `container c is waiting: ImagePullBackOff: Back-off pulling image "x"`},
		{"crash loop", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 3,
				State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=c"}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
		}), nil, server.PodDetails{}, "container c keeps crashing: restarted 3 times, last exit code 3 (Error); back-off 40s restarting failed container=c"},
		{"crash loop with the back-off left", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 2,
				State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
		}), nil, server.PodDetails{BackOff: []server.ContainerBackOff{{Container: "c", Until: metav1.NewTime(now.Add(12300 * time.Millisecond))}}},
			"container c keeps crashing: restarted 2 times, last exit code 1 (Error); restarts in 13s"},
		{"readiness", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
			p.Status.ContainerStatuses[0].Started = ptr.To(true)
		}), []v1.Event{unhealthy}, server.PodDetails{}, "container c is running but not ready: Readiness probe failed: nope"},
		{"init crash first", pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i"}}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", RestartCount: 1, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		}), nil, server.PodDetails{}, "init container i keeps crashing: restarted 1 times"},
		{"a volume failed", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}), nil, server.PodDetails{Volumes: []server.VolumeState{{Name: "ok", Kind: "emptyDir", State: server.VolumeReady},
			{Name: "data", Kind: "hostPath", State: server.VolumeFailed, Error: "hostPath type check failed: stat /x: no such file or directory"}}},
			"volume data (hostPath) cannot be set up: hostPath type check failed: stat /x: no such file or directory"},
		{"rejected", pod("p", func(p *v1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = v1.PodFailed, "OutOfcpu", "Node didn't have enough resource: cpu"
		}), nil, server.PodDetails{}, "the pod has finished (Failed): OutOfcpu: Node didn't have enough resource: cpu"},
		{"volumes", pod("p", nil), []v1.Event{{Reason: "FailedMount", Message: `configmap "x" not found`}}, server.PodDetails{}, `its volumes are not ready: configmap "x" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notReady(tc.pod, tc.events, tc.details, now); got != tc.want {
				t.Fatalf("notReady = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	p := pod("web", func(p *v1.Pod) {
		p.Spec.Containers[0].Image = "busybox"
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}, PeriodSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1, TimeoutSeconds: 1}
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}},
			{Name: "later", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}
		p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
	})
	var b bytes.Buffer
	setUp := metav1.NewTime(now.Add(-2 * time.Minute))
	failed := metav1.NewTime(now.Add(-5 * time.Second))
	details := server.PodDetails{Source: "checkpoint", Volumes: []server.VolumeState{
		{Name: "data", Kind: "emptyDir", State: server.VolumeReady, Path: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/data", SetUpAt: &setUp},
		{Name: "config", Kind: "configMap", State: server.VolumeFailed, Error: `configmap "c" not found`, ErrAt: &failed},
		{Name: "later", Kind: "hostPath", State: server.VolumePending},
	}}
	if err := describe(&b, p, []v1.Event{{Type: "Warning", Reason: "Unhealthy", Message: "Readiness probe failed: ", InvolvedObject: v1.ObjectReference{FieldPath: "spec.containers{c}"}}}, details, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Name:", "web", "Source:", "checkpoint", "Not Ready:", "container c is running but not ready: Readiness probe failed:",
		"Readiness:", "exec [false] delay=0s timeout=1s period=1s #success=1 #failure=3", "data:", "EmptyDir", "Ready (set up 2m ago)",
		"/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/data", "config:", "ConfigMap c", `Failed 5s ago: configmap "c" not found`,
		"later:", "Pending", "Events:", "Unhealthy"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
}

func TestDescribeBackOff(t *testing.T) {
	p := pod("crash", func(p *v1.Pod) {
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 3,
			State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=c"}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	})
	until := metav1.NewTime(now.Add(27 * time.Second))
	var b bytes.Buffer
	if err := describe(&b, p, nil, server.PodDetails{BackOff: []server.ContainerBackOff{{Container: "c", Delay: metav1.Duration{Duration: 40 * time.Second}, Until: until}}}, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Back-off:", "27s more to wait (restarts at " + until.Format(time.RFC1123Z) + ")", "restarts in 27s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("describe lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Count(b.String(), "Back-off:") != 1 {
		t.Errorf("the back-off shown other than once (State only, not Last State):\n%s", b.String())
	}
}
