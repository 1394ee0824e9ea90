package podspec

import v1 "k8s.io/api/core/v1"

// SetCondition puts c in status's conditions, replacing the one of its
// type; the transition time stays when the condition's status does not
// change, as upstream's UpdatePodCondition.
func SetCondition(status *v1.PodStatus, c v1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = status.Conditions[i].LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
