package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerShouldRestart(t *testing.T) {
	p := func(c v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &c }
	rules := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}}
	}
	tests := []struct {
		name     string
		pod      v1.RestartPolicy
		c        v1.Container
		exitCode int32
		want     bool
	}{
		{"pod Always", v1.RestartPolicyAlways, v1.Container{}, 0, true},
		{"pod OnFailure, success", v1.RestartPolicyOnFailure, v1.Container{}, 0, false},
		{"pod OnFailure, failure", v1.RestartPolicyOnFailure, v1.Container{}, 1, true},
		{"pod Never", v1.RestartPolicyNever, v1.Container{}, 1, false},
		{"container Always in a Never pod", v1.RestartPolicyNever, v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyAlways)}, 0, true},
		{"container Never in an Always pod", v1.RestartPolicyAlways, v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever)}, 1, false},
		{"rule In matches", v1.RestartPolicyAlways, v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 42, true},
		{"rule In does not match", v1.RestartPolicyAlways, v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 1, false},
		{"rule NotIn matches", v1.RestartPolicyNever, v1.Container{RestartPolicy: p(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: rules(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, 3, true},
		{"rules without a container policy are not read", v1.RestartPolicyNever, v1.Container{
			RestartPolicyRules: rules(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.PodSpec{RestartPolicy: tt.pod}
			if got := ContainerShouldRestart(&tt.c, spec, tt.exitCode); got != tt.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}
