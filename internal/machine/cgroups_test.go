package machine

import "testing"

func TestCgroupsDir(t *testing.T) {
	for _, tc := range []struct {
		cg   Cgroups
		want string
	}{
		{Cgroups{Mount: "/sys/fs/cgroup"}, "/sys/fs/cgroup/memory/kubepods/burstable"},
		{Cgroups{Mount: "/sys/fs/cgroup", V2: true}, "/sys/fs/cgroup/kubepods/burstable"},
	} {
		if got := tc.cg.Dir("memory", "/kubepods/burstable"); got != tc.want {
			t.Errorf("v2 %v: %s, want %s", tc.cg.V2, got, tc.want)
		}
	}
}
