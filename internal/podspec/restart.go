package podspec

import v1 "k8s.io/api/core/v1"

// ContainerShouldRestart reports whether a container that exited with
// exitCode runs again, as upstream with ContainerRestartRules (beta, on by
// default since 1.35): the container's first restartPolicyRules rule that
// matches the exit code decides (action Restart, or RestartAllContainers:
// with every other container of the pod), then the container's own
// restartPolicy, then the pod's.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c, exitCode); ok &&
			(rule.Action == v1.ContainerRestartRuleActionRestart || rule.Action == v1.ContainerRestartRuleActionRestartAllContainers) {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	default:
		return true
	}
}

// RestartsAfterKill reports whether a running container that nodelet kills
// (a failed liveness or startup probe) is started again: only the
// restartPolicy (the container's, else the pod's) counts, the rules need an
// exit code.
func RestartsAfterKill(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// RestartsAllContainers reports whether a container that exited with
// exitCode restarts the whole pod in place: its first restartPolicyRules
// rule matching the exit code has the action RestartAllContainers
// (RestartAllContainersOnContainerExits).
func RestartsAllContainers(c *v1.Container, exitCode int32) bool {
	rule, ok := matchingRestartRule(c, exitCode)
	return ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// CouldRestartAllContainers reports whether a container of the pod has a
// RestartAllContainers rule (upstream's AllContainersCouldRestart): such a
// pod reports the AllContainersRestarting condition.
func CouldRestartAllContainers(spec *v1.PodSpec) bool {
	for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, rule := range cs[i].RestartPolicyRules {
				if rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

func matchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range rule.ExitCodes.Values {
			if v == exitCode {
				in = true
			}
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}
