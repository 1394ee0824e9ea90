package cgroups

import (
	"strings"
	"testing"
)

func TestPodUIDFromDir(t *testing.T) {
	for _, tc := range []struct {
		base, want string
		ok         bool
	}{
		{"pod0f5a2c3e-1111-2222-3333-444455556666", "0f5a2c3e-1111-2222-3333-444455556666", true},
		{"kubepods-burstable-pod0f5a2c3e_1111_2222_3333_444455556666.slice", "0f5a2c3e-1111-2222-3333-444455556666", true},
		{"kubepods-pod0f5a2c3e_1111_2222_3333_444455556666.slice", "0f5a2c3e-1111-2222-3333-444455556666", true},
		{"kubepods-burstable.slice", "", false},
		{"kubepods.slice", "", false},
		{"burstable", "", false},
		{"pod", "", false},
		{"cri-containerd-" + strings.Repeat("b", 64) + ".scope", "", false},
		{strings.Repeat("b", 64), "", false},
	} {
		got, ok := PodUIDFromDir(tc.base)
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("PodUIDFromDir(%q) = %q, %v; want %q, %v", tc.base, got, ok, tc.want, tc.ok)
		}
	}
}
