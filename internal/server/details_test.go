package server

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/volumes"
)

func TestBackOffs(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	crashed := func(name string, finished time.Time) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name,
			State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(finished)}}}
	}
	spec := v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "app"}, {Name: "other"}}}
	for _, tc := range []struct {
		name   string
		status v1.PodStatus
		delay  time.Duration
		in     bool
		want   []ContainerBackOff
	}{
		{"no container waiting", v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}, 10 * time.Second, true, nil},
		{"an app container 5 s into a 40 s back-off", v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{crashed("app", now.Add(-5*time.Second))}}, 40 * time.Second, true,
			[]ContainerBackOff{{Container: "app", Delay: metav1.Duration{Duration: 40 * time.Second}, Until: metav1.NewTime(now.Add(35 * time.Second))}}},
		{"an init container first", v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{crashed("init", now.Add(-time.Second))}, ContainerStatuses: []v1.ContainerStatus{crashed("other", now.Add(-2*time.Second))}}, 10 * time.Second, true,
			[]ContainerBackOff{{Container: "init", Delay: metav1.Duration{Duration: 10 * time.Second}, Until: metav1.NewTime(now.Add(9 * time.Second))},
				{Container: "other", Delay: metav1.Duration{Duration: 10 * time.Second}, Until: metav1.NewTime(now.Add(8 * time.Second))}}},
		{"the back-off is over (status not updated yet)", v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{crashed("app", now.Add(-20*time.Second))}}, 10 * time.Second, true, nil},
		{"the runtime has no back-off for it", v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{crashed("app", now.Add(-time.Second))}}, 10 * time.Second, false, nil},
		{"a status of a container not in the spec", v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{crashed("gone", now.Add(-time.Second))}}, 10 * time.Second, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: spec, Status: tc.status}
			got := backOffs(pod, now, func(c *v1.Container, finished time.Time) (time.Duration, bool) {
				if c.Name == "" || finished.IsZero() {
					t.Errorf("delay asked for %q at %v", c.Name, finished)
				}
				return tc.delay, tc.in
			})
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Container != tc.want[i].Container || got[i].Delay != tc.want[i].Delay || !got[i].Until.Equal(&tc.want[i].Until) {
					t.Errorf("%d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestVolumeStates(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "was-ok", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{}}},
		{Name: "later", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
	}}}
	got := volumeStates(pod, map[string]volumes.State{
		"data":   {Path: "/pods/u/volumes/kubernetes.io~empty-dir/data", SetUpAt: at},
		"config": {Err: `configmap "c" not found`, ErrAt: at},
		"was-ok": {Path: "/p", SetUpAt: at, Err: "boom", ErrAt: at.Add(time.Minute)},
	})
	want := []struct{ name, kind, state, path, err string }{
		{"data", "emptyDir", VolumeReady, "/pods/u/volumes/kubernetes.io~empty-dir/data", ""},
		{"config", "configMap", VolumeFailed, "", `configmap "c" not found`},
		{"was-ok", "secret", VolumeFailed, "/p", "boom"},
		{"later", "hostPath", VolumePending, "", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Kind != w.kind || g.State != w.state || g.Path != w.path || g.Error != w.err {
			t.Errorf("%d: got %+v, want %+v", i, g, w)
		}
	}
	if got[0].SetUpAt == nil || !got[0].SetUpAt.Time.Equal(at) || got[1].ErrAt == nil || got[3].SetUpAt != nil {
		t.Errorf("times: %+v", got)
	}
}
