package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func pod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c"}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func running(ready bool, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: "c", Ready: ready, RestartCount: restarts, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func TestPodRow(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		pod                     *v1.Pod
		ready, status, restarts string
	}{
		{"pending", pod("p", nil), "0/1", "Pending", "0"},
		{"running", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 2)}
		}), "1/1", "Running", "2"},
		{"crash loop", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", RestartCount: 4, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}), "0/1", "CrashLoopBackOff", "4"},
		{"image pull", pod("p", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
		}), "0/1", "ErrImagePull", "0"},
		{"rejected", pod("p", func(p *v1.Pod) { p.Status.Phase, p.Status.Reason = v1.PodFailed, "OutOfcpu" }), "0/1", "OutOfcpu", "0"},
		{"completed", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodSucceeded
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}}
		}), "0/1", "Completed", "0"},
		{"exit code", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3}}}}
		}), "0/1", "ExitCode:3", "0"},
		{"init running", pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i1"}, {Name: "i2"}}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{
				{Name: "i1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "i2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		}), "0/1", "Init:1/2", "0"},
		{"init crash", pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i1"}}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "i1", RestartCount: 3, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}), "0/1", "Init:CrashLoopBackOff", "3"},
		{"sidecar counted", pod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
			p.Status.Phase = v1.PodRunning
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptr.To(true), RestartCount: 1, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(true, 0)}
		}), "2/2", "Running", "1"},
		{"not ready", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{running(false, 0)}
		}), "0/1", "Running", "0"},
		{"terminating", pod("p", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}), "0/1", "Terminating", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := podRow(tc.pod, now)
			if r.Ready != tc.ready || r.Status != tc.status || r.Restarts != tc.restarts || r.Age != "90s" {
				t.Fatalf("row %+v, want %s %s %s", r, tc.ready, tc.status, tc.restarts)
			}
		})
	}
}

func TestPrintPodsWide(t *testing.T) {
	static := pod("web-n1", func(p *v1.Pod) {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
		p.Status.PodIP = "10.88.0.5"
	})
	static.CreationTimestamp = metav1.Time{}
	static.Status.StartTime = &metav1.Time{Time: now.Add(-90 * time.Second)}
	restored := pod("restored", nil)
	restored.UID = "u-restored"
	var b bytes.Buffer
	if err := printPods(&b, []v1.Pod{*static, *pod("api", nil), *restored}, map[types.UID]string{"u-restored": "checkpoint"}, "wide", now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME READY STATUS RESTARTS AGE IP SOURCE" ||
		strings.Join(strings.Fields(lines[3]), " ") != "default web-n1 0/1 Pending 0 90s 10.88.0.5 file" ||
		strings.Join(strings.Fields(lines[2]), " ") != "default restored 0/1 Pending 0 90s <none> checkpoint" ||
		strings.Join(strings.Fields(lines[1]), " ") != "default api 0/1 Pending 0 90s <none> api" {
		t.Fatalf("table:\n%s", b.String())
	}
	if err := printPods(&b, nil, nil, "xml", now); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestFindPod(t *testing.T) {
	pods := []v1.Pod{*pod("web-n1", nil), *pod("db", nil), *pod("db", func(p *v1.Pod) { p.Namespace = "other" })}
	for _, tc := range []struct {
		ns, name, want, err string
	}{
		{"", "web-n1", "default/web-n1", ""},
		{"", "web", "default/web-n1", ""},
		{"", "db", "", "several namespaces"},
		{"other", "db", "other/db", ""},
		{"", "other/db", "other/db", ""},
		{"", "nope", "", `pod "nope" not found`},
	} {
		p, err := findPod(pods, tc.ns, tc.name)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("findPod(%q, %q) = %v, want error %q", tc.ns, tc.name, err, tc.err)
			}
		case err != nil || p.Namespace+"/"+p.Name != tc.want:
			t.Errorf("findPod(%q, %q) = %v %v, want %s", tc.ns, tc.name, p, err, tc.want)
		}
	}
}
