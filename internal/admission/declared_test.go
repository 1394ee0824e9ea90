package admission

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestDeclaredFeatures(t *testing.T) {
	on := func(string) bool { return true }
	only := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}
	}
	restartAll := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
		RestartPolicy: ptr.To(v1.ContainerRestartPolicyNever),
		RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}}}}
	usernsHostNet := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true, HostUsers: ptr.To(false), Containers: []v1.Container{{Name: "c"}}}}
	plain := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	tests := []struct {
		name      string
		gate      func(string) bool
		wantNames string
		pod       *v1.Pod
		wantMsg   string // "" admitted
	}{
		{name: "every gate on: only what nodelet implements", gate: on,
			wantNames: "ExtendWebSocketsToKubelet,InPlacePodVerticalScalingInitContainers,RestartAllContainersOnContainerExits", pod: restartAll},
		{name: "a plain pod", gate: on, wantNames: "ExtendWebSocketsToKubelet,InPlacePodVerticalScalingInitContainers,RestartAllContainersOnContainerExits", pod: plain},
		{name: "user namespaces with the host network: not declared", gate: on,
			wantNames: "ExtendWebSocketsToKubelet,InPlacePodVerticalScalingInitContainers,RestartAllContainersOnContainerExits", pod: usernsHostNet,
			wantMsg: "Pod requires node features that are not available: UserNamespacesHostNetworkSupport"},
		{name: "RestartAllContainers off", gate: only("ExtendWebSocketsToKubelet", "InPlacePodVerticalScalingInitContainers"), wantNames: "ExtendWebSocketsToKubelet,InPlacePodVerticalScalingInitContainers", pod: restartAll,
			wantMsg: "Pod requires node features that are not available: RestartAllContainersOnContainerExits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := NewDeclaredFeatures(tt.gate, "v1.37.2")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(d.Names(), ","); got != tt.wantNames {
				t.Errorf("declared %s, want %s", got, tt.wantNames)
			}
			r := d.Admit(context.Background(), Attributes{Pod: tt.pod})
			switch {
			case tt.wantMsg == "" && !r.Admit:
				t.Errorf("refused: %s", r.Message)
			case tt.wantMsg != "" && (r.Admit || r.Reason != ReasonPodFeatureUnsupported || r.Message != tt.wantMsg):
				t.Errorf("got %+v, want %s: %s", r, ReasonPodFeatureUnsupported, tt.wantMsg)
			}
		})
	}
	if _, err := NewDeclaredFeatures(on, "not-a-version"); err == nil {
		t.Error("a bad version accepted")
	}
}
