package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSysctls(t *testing.T) {
	s, err := NewSysctls([]string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	withSysctls := func(hostNet bool, names ...string) *v1.Pod {
		p := &v1.Pod{}
		p.Spec.HostNetwork = hostNet
		p.Spec.SecurityContext = &v1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		message string // "" admits
	}{
		{"none", &v1.Pod{}, ""},
		{"safe", withSysctls(false, "kernel.shm_rmid_forced"), ""},
		{"safe with slashes", withSysctls(false, "net/ipv4/ip_local_port_range"), ""},
		{"unsafe, allowed by prefix", withSysctls(false, "kernel.msgmax"), ""},
		{"unsafe, allowed by name", withSysctls(false, "net.core.somaxconn"), ""},
		{"unsafe, not allowed", withSysctls(false, "kernel.sem"), `forbidden sysctl: "kernel.sem" not allowlisted`},
		{"net sysctl with host network", withSysctls(true, "net.ipv4.tcp_syncookies"),
			`forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Admit(t.Context(), Attributes{Pod: tt.pod})
			if tt.message == "" {
				if !r.Admit {
					t.Fatalf("rejected: %s", r.Message)
				}
				return
			}
			if r.Admit || r.Reason != SysctlForbidden || r.Message != tt.message {
				t.Fatalf("got %+v, want %s %q", r, SysctlForbidden, tt.message)
			}
		})
	}
	if _, err := NewSysctls([]string{"vm.swappiness"}); err == nil {
		t.Error("a sysctl that is not namespaced was accepted")
	}
}
