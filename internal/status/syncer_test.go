package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func conds(types ...v1.PodConditionType) []v1.PodCondition {
	var out []v1.PodCondition
	for _, t := range types {
		out = append(out, v1.PodCondition{Type: t, Status: v1.ConditionTrue})
	}
	return out
}

func condTypes(cs []v1.PodCondition) []v1.PodConditionType {
	var out []v1.PodConditionType
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestMergeStatusKeepsForeignConditionsAndOrder(t *testing.T) {
	cur := v1.PodStatus{Conditions: append(conds(v1.PodScheduled, "DisruptionTarget", v1.PodReady), v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse})}
	ours := v1.PodStatus{Conditions: conds(v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled)}
	got := mergeStatus(cur, ours, false)
	want := []v1.PodConditionType{v1.PodScheduled, "DisruptionTarget", v1.PodReady, v1.PodInitialized, v1.PodReadyToStartContainers, v1.ContainersReady}
	if g := condTypes(got.Conditions); len(g) != len(want) {
		t.Fatalf("conditions %v, want %v", g, want)
	} else {
		for i := range want {
			if g[i] != want[i] {
				t.Fatalf("conditions %v, want %v", g, want)
			}
		}
	}
	if c := findCondition(got.Conditions, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("our Initialized condition did not replace the API's")
	}
	// A pod bound without PodScheduled gets it; a static pod's comes from us.
	got = mergeStatus(v1.PodStatus{}, ours, false)
	if findCondition(got.Conditions, v1.PodScheduled) == nil {
		t.Errorf("no PodScheduled for a bound pod: %v", condTypes(got.Conditions))
	}
}
