package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func TestSeccompProfile(t *testing.T) {
	runtimeDefault := &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
	unconfined := &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}
	for _, tc := range []struct {
		name           string
		seccompDefault bool
		pod, container *v1.SeccompProfile
		privileged     bool
		want           runtimeapi.SecurityProfile_ProfileType
	}{
		{name: "nothing asked, seccompDefault off", want: runtimeapi.SecurityProfile_Unconfined},
		{name: "nothing asked, seccompDefault on", seccompDefault: true, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "the pod's profile", pod: runtimeDefault, want: runtimeapi.SecurityProfile_RuntimeDefault},
		{name: "the container's over the pod's", pod: runtimeDefault, container: unconfined, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "the pod's Unconfined over seccompDefault", seccompDefault: true, pod: unconfined, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "the container's Unconfined over seccompDefault", seccompDefault: true, container: unconfined, want: runtimeapi.SecurityProfile_Unconfined},
		{name: "privileged stays unconfined with seccompDefault", seccompDefault: true, privileged: true, want: runtimeapi.SecurityProfile_Unconfined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{cfg: Config{SeccompDefault: tc.seccompDefault}}
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{SeccompProfile: tc.pod}}}
			c := &v1.Container{SecurityContext: &v1.SecurityContext{SeccompProfile: tc.container}}
			if tc.privileged {
				c.SecurityContext.Privileged = ptr.To(true)
			}
			got, err := m.seccompProfile(pod, c)
			if err != nil || got.ProfileType != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
