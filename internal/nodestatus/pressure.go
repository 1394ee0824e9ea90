package nodestatus

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// pressureText is what upstream writes for each pressure condition, False
// and True, and the node event of each transition.
var pressureText = []struct {
	typ                       v1.NodeConditionType
	falseReason, falseMessage string
	trueReason, trueMessage   string
	toFalseEvent, toTrueEvent string
}{
	{v1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "NodeHasSufficientMemory", "NodeHasInsufficientMemory"},
	{v1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
		"KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasNoDiskPressure", "NodeHasDiskPressure"},
	{v1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available",
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasSufficientPID", "NodeHasInsufficientPID"},
}

// PressureConditions are the MemoryPressure, DiskPressure and PIDPressure
// conditions, True for those in pressure, with upstream's reasons and
// messages.
func PressureConditions(pressure []v1.NodeConditionType) []v1.NodeCondition {
	out := make([]v1.NodeCondition, 0, len(pressureText))
	for _, p := range pressureText {
		c := v1.NodeCondition{Type: p.typ, Status: v1.ConditionFalse, Reason: p.falseReason, Message: p.falseMessage}
		if slices.Contains(pressure, p.typ) {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, p.trueReason, p.trueMessage
		}
		out = append(out, c)
	}
	return out
}

// pressureEvents are the node events of the pressure conditions that
// changed from old to cur, as upstream (NodeHasInsufficientMemory when
// MemoryPressure turns True, NodeHasSufficientMemory when it turns False or
// is first reported False, ...).
func pressureEvents(old, cur []v1.NodeCondition) []string {
	status := func(cs []v1.NodeCondition, t v1.NodeConditionType) v1.ConditionStatus {
		for _, c := range cs {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	var out []string
	for _, p := range pressureText {
		was, is := status(old, p.typ), status(cur, p.typ)
		switch {
		case was == is:
		case is == v1.ConditionTrue:
			out = append(out, p.toTrueEvent)
		case is == v1.ConditionFalse:
			out = append(out, p.toFalseEvent)
		}
	}
	return out
}
