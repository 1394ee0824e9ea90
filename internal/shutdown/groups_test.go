package shutdown

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

type band = kubeletv1beta1.ShutdownGracePeriodByPodPriority

func TestPeriods(t *testing.T) {
	for _, tc := range []struct {
		name             string
		byPriority       []band
		period, critical time.Duration
		want             string
	}{
		{"off", nil, 0, 0, ""},
		{"period only", nil, 30 * time.Second, 0, "0:30 2000000000:0"},
		{"period and critical", nil, 30 * time.Second, 10 * time.Second, "0:20 2000000000:10"},
		{"critical above the period: off", nil, 10 * time.Second, 20 * time.Second, ""},
		{"by priority, sorted", []band{{Priority: 100000, ShutdownGracePeriodSeconds: 10}, {Priority: 1, ShutdownGracePeriodSeconds: 5}}, 0, 0, "1:5 100000:10"},
		{"by priority wins", []band{{Priority: 7, ShutdownGracePeriodSeconds: 3}}, 30 * time.Second, 10 * time.Second, "7:3"},
	} {
		var got []string
		for _, p := range Periods(tc.byPriority, tc.period, tc.critical) {
			got = append(got, fmt.Sprintf("%d:%d", p.Priority, p.ShutdownGracePeriodSeconds))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, strings.Join(got, " "), tc.want)
		}
	}
	if got := Requested([]band{{ShutdownGracePeriodSeconds: 20}, {ShutdownGracePeriodSeconds: 10}}); got != 30*time.Second {
		t.Errorf("Requested %v", got)
	}
}

func pod(name string, priority *int32, grace *int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Priority: priority, TerminationGracePeriodSeconds: grace}}
}

// Upstream's cases (nodeshutdown_manager_test.go's groupByPriority).
func TestGroupByPriority(t *testing.T) {
	periods := Periods([]band{
		{Priority: 1, ShutdownGracePeriodSeconds: 10},
		{Priority: 2, ShutdownGracePeriodSeconds: 20},
		{Priority: 2000000000, ShutdownGracePeriodSeconds: 30},
	}, 0, 0)
	pods := []*v1.Pod{
		pod("none", nil, nil), pod("zero", ptr.To[int32](0), nil), pod("one", ptr.To[int32](1), nil),
		pod("two", ptr.To[int32](2), nil), pod("thousand", ptr.To[int32](1000), nil),
		pod("critical", ptr.To[int32](2000000000), nil), pod("above", ptr.To[int32](2000001000), nil),
	}
	groups := GroupByPriority(periods, pods)
	var got []string
	for _, g := range groups {
		var names []string
		for _, p := range g.Pods {
			names = append(names, p.Name)
		}
		got = append(got, fmt.Sprintf("%d:%s", g.Priority, strings.Join(names, ",")))
	}
	want := "1:none,zero,one 2:two,thousand 2000000000:critical,above"
	if strings.Join(got, " ") != want {
		t.Errorf("groups %q, want %q", strings.Join(got, " "), want)
	}
	if GroupByPriority(nil, pods) != nil {
		t.Error("groups without periods")
	}
}

func TestPodGracePeriod(t *testing.T) {
	g := Group{ShutdownGracePeriodByPodPriority: band{ShutdownGracePeriodSeconds: 20}}
	for _, tc := range []struct {
		own  *int64
		want int64
	}{{nil, 20}, {ptr.To[int64](5), 5}, {ptr.To[int64](20), 20}, {ptr.To[int64](30), 20}, {ptr.To[int64](0), 0}} {
		if got := PodGracePeriod(pod("p", nil, tc.own), g); got != tc.want {
			t.Errorf("own %v: %d, want %d", tc.own, got, tc.want)
		}
	}
}

func TestSetStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := &v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	SetStatus(st, 3, now)
	if st.Phase != v1.PodFailed || st.Reason != "Terminated" || st.Message != "Pod was terminated in response to imminent node shutdown." {
		t.Errorf("status %s %s %q", st.Phase, st.Reason, st.Message)
	}
	if len(st.Conditions) != 2 || st.Conditions[1].Type != v1.DisruptionTarget || st.Conditions[1].Reason != "TerminationByKubelet" ||
		st.Conditions[1].Status != v1.ConditionTrue || !st.Conditions[1].LastTransitionTime.Time.Equal(now) || st.Conditions[1].ObservedGeneration != 3 {
		t.Errorf("conditions %+v", st.Conditions)
	}
	// Once more later: one condition, its transition time kept.
	SetStatus(st, 3, now.Add(time.Minute))
	if len(st.Conditions) != 2 || !st.Conditions[1].LastTransitionTime.Time.Equal(now) {
		t.Errorf("again: %+v", st.Conditions)
	}
	// Its containers exited 0 on SIGTERM: Succeeded, no reason nor
	// message (as upstream's in the real-node bed), the condition set.
	for _, done := range []*v1.PodStatus{{Phase: v1.PodSucceeded}, {Phase: v1.PodSucceeded, Reason: Reason, Message: Message}} {
		SetStatus(done, 1, now)
		if done.Phase != v1.PodSucceeded || done.Reason != "" || done.Message != "" {
			t.Errorf("a succeeded pod became %s %q %q", done.Phase, done.Reason, done.Message)
		}
		if len(done.Conditions) != 1 || done.Conditions[0].Type != v1.DisruptionTarget {
			t.Errorf("a succeeded pod's conditions %+v", done.Conditions)
		}
	}
}
