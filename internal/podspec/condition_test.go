package podspec

import (
	"testing"
	"time"

	"reflect"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSetCondition(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: t0}
	for _, tc := range []struct {
		name string
		in   []v1.PodCondition
		c    v1.PodCondition
		want []v1.PodCondition
	}{
		{"added", []v1.PodCondition{ready},
			v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: t1},
			[]v1.PodCondition{ready, {Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: t1}}},
		{"same status keeps the transition time", []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "old", LastTransitionTime: t0}},
			v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "new", LastTransitionTime: t1},
			[]v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "new", LastTransitionTime: t0}}},
		{"new status moves it", []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, LastTransitionTime: t0}},
			v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: t1},
			[]v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: t1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1.PodStatus{Conditions: tc.in}
			SetCondition(st, tc.c)
			if !reflect.DeepEqual(tc.want, st.Conditions) {
				t.Errorf("conditions = %+v, want %+v", st.Conditions, tc.want)
			}
		})
	}
}
