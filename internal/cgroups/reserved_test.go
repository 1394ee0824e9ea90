package cgroups

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestEnforceReserved(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run("v2="+strconv.FormatBool(v2), func(t *testing.T) {
			k := newFakeKernel(t, v2)
			var events []string
			m := newManager(t, k, func(c *Config) {
				c.EnforceNodeAllocatable = []string{EnforcePods, EnforceKubeReserved, EnforceSystemReservedCompressible}
				c.KubeReserved = map[string]string{"memory": "100Mi", "cpu": "100m", "pid": "200"}
				c.SystemReserved = map[string]string{"memory": "50Mi", "cpu": "500m"}
				c.KubeReservedCgroup, c.SystemReservedCgroup = "/kube-reserved", "/system-reserved"
				c.Event = func(eventType, reason, message string) { events = append(events, eventType+" "+reason+": "+message) }
			})
			if v2 {
				k.write("cgroup.subtree_control", "+cpu +memory +pids")
			}
			for _, d := range []string{"kube-reserved", "system-reserved"} {
				for _, h := range k.hierarchyDirs() {
					if err := k.mkdir(filepath.Join(k.root, h, d)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if v2 {
				check(t, k, "kube-reserved/memory.max", strconv.FormatInt(100*mi, 10))
				check(t, k, "kube-reserved/cpu.weight", strconv.FormatInt(CPUSharesToWeight(102), 10))
				check(t, k, "kube-reserved/pids.max", "200")
				check(t, k, "system-reserved/cpu.weight", strconv.FormatInt(CPUSharesToWeight(512), 10))
				check(t, k, "system-reserved/memory.max", "max")
			} else {
				check(t, k, "memory/kube-reserved/memory.limit_in_bytes", strconv.FormatInt(100*mi, 10))
				check(t, k, "cpu,cpuacct/kube-reserved/cpu.shares", "102")
				check(t, k, "pids/kube-reserved/pids.max", "200")
				// Compressible: cpu shares only, the memory limit untouched.
				check(t, k, "cpu,cpuacct/system-reserved/cpu.shares", "512")
				check(t, k, "memory/system-reserved/memory.limit_in_bytes", "9223372036854771712")
			}
			want := []string{
				"Normal NodeAllocatableEnforced: Updated Node Allocatable limit across pods",
				"Normal NodeAllocatableEnforced: Updated limits on kube reserved cgroup /kube-reserved",
				"Normal NodeAllocatableEnforced: Updated limits on system reserved cgroup /system-reserved",
			}
			if strings.Join(events, "\n") != strings.Join(want, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestEnforceReservedMissingCgroup(t *testing.T) {
	k := newFakeKernel(t, false)
	var events []string
	m := newManager(t, k, func(c *Config) {
		c.EnforceNodeAllocatable = []string{EnforcePods, EnforceSystemReserved}
		c.SystemReservedCgroup = "/system-reserved"
		c.Event = func(eventType, reason, message string) { events = append(events, eventType+" "+reason+": "+message) }
	})
	err := m.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `: Failed to enforce System Reserved Cgroup Limits on "/system-reserved": cgroup "/system-reserved" has some missing paths: `) {
		t.Fatalf("Start: %v", err)
	}
	if len(events) != 2 || !strings.HasPrefix(events[1], "Warning FailedNodeAllocatableEnforcement: Failed to enforce System Reserved Cgroup Limits") {
		t.Errorf("events: %q", events)
	}
}

func TestParseReservedName(t *testing.T) {
	k := newFakeKernel(t, false)
	for _, tc := range []struct {
		driver, in, want string
	}{
		{DriverCgroupfs, "/system-reserved", "/system-reserved"},
		{DriverCgroupfs, "/a/b", "/a/b"},
		{DriverSystemd, "/system.slice", "/system.slice"},
		{DriverSystemd, "/kube.slice/kube-reserved.slice", "/kube.slice/kube-reserved.slice"},
		{DriverSystemd, "/kube.slice/kube-my_daemons.slice", "/kube.slice/kube-my_daemons.slice"},
	} {
		m := newManager(t, k, func(c *Config) { c.Driver = tc.driver })
		if got := m.Name(m.parseName(tc.in)); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.driver, tc.in, got, tc.want)
		}
	}
}

func TestReservedConfig(t *testing.T) {
	rc, err := ReservedConfig(map[string]string{"cpu": "1", "memory": "1Gi", "pid": "100", "hugepages-2Mi": "4Mi"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if *rc.CPUShares != 1024 || *rc.Memory != gi || *rc.PidsLimit != 100 || rc.HugePageLimit[2*mi] != 4*mi {
		t.Errorf("%+v", rc)
	}
	rc, _ = ReservedConfig(map[string]string{"cpu": "1", "memory": "1Gi"}, true)
	if *rc.CPUShares != 1024 || rc.Memory != nil || rc.PidsLimit != nil {
		t.Errorf("compressible: %+v", rc)
	}
	if rc, _ := ReservedConfig(nil, false); rc != nil {
		t.Errorf("nil reservation: %+v", rc)
	}
	if _, err := ReservedConfig(map[string]string{"memory": "lots"}, false); err == nil {
		t.Error("bad quantity: no error")
	}
}
