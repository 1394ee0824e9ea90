package nodestatus

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPressureConditions(t *testing.T) {
	got := PressureConditions([]v1.NodeConditionType{v1.NodeDiskPressure})
	want := []string{
		"MemoryPressure=False/KubeletHasSufficientMemory/kubelet has sufficient memory available",
		"DiskPressure=True/KubeletHasDiskPressure/kubelet has disk pressure",
		"PIDPressure=False/KubeletHasSufficientPID/kubelet has sufficient PID available",
	}
	var s []string
	for _, c := range got {
		s = append(s, string(c.Type)+"="+string(c.Status)+"/"+c.Reason+"/"+c.Message)
	}
	if strings.Join(s, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range PressureConditions([]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodePIDPressure}) {
		if (c.Type == v1.NodeDiskPressure) == (c.Status == v1.ConditionTrue) {
			t.Errorf("%s is %s", c.Type, c.Status)
		}
		if c.Type == v1.NodeMemoryPressure && c.Reason != "KubeletHasInsufficientMemory" || c.Type == v1.NodePIDPressure && c.Reason != "KubeletHasInsufficientPID" {
			t.Errorf("%s: reason %s", c.Type, c.Reason)
		}
	}
}

func TestPressureEvents(t *testing.T) {
	none := PressureConditions(nil)
	mem := PressureConditions([]v1.NodeConditionType{v1.NodeMemoryPressure})
	all := PressureConditions([]v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure})
	for _, tc := range []struct {
		name     string
		old, cur []v1.NodeCondition
		want     string
	}{
		{"first report: each False", nil, none, "NodeHasSufficientMemory NodeHasNoDiskPressure NodeHasSufficientPID"},
		{"no change", none, none, ""},
		{"memory pressure", none, mem, "NodeHasInsufficientMemory"},
		{"memory recovers", mem, none, "NodeHasSufficientMemory"},
		{"disk and PID too", mem, all, "NodeHasDiskPressure NodeHasInsufficientPID"},
	} {
		if got := strings.Join(pressureEvents(tc.old, tc.cur), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
