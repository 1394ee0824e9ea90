package cgroups

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestResizePod resizes a Burstable pod with limits (cpu 100m-200m,
// memory 64Mi) to cpu 300m-400m, memory 128Mi, one part at a time, and
// reads the pod cgroup back with PodCgroupConfig after each step.
func TestResizePod(t *testing.T) {
	type want struct{ shares, quota, memory int64 }
	before := podOf("rz", ctr("c", rl("cpu", "100m", "memory", "32Mi"), rl("cpu", "200m", "memory", "64Mi")))
	after := podOf("rz", ctr("c", rl("cpu", "300m", "memory", "32Mi"), rl("cpu", "400m", "memory", "128Mi")))
	steps := []struct {
		res   v1.ResourceName
		limit bool
		want  want
	}{
		{v1.ResourceMemory, false, want{102, 20000, 64 * mi}}, // a memory request is written nowhere
		{v1.ResourceMemory, true, want{102, 20000, 128 * mi}},
		{v1.ResourceCPU, true, want{102, 40000, 128 * mi}},
		{v1.ResourceCPU, false, want{307, 40000, 128 * mi}},
	}
	for _, v2 := range []bool{false, true} {
		t.Run("v2="+strconv.FormatBool(v2), func(t *testing.T) {
			k := newFakeKernel(t, v2)
			m := newManager(t, k, nil)
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			parent, err := m.EnsurePod(ctx, before)
			if err != nil {
				t.Fatal(err)
			}
			read := func() want {
				t.Helper()
				rc, err := m.PodCgroupConfig(before)
				if err != nil {
					t.Fatal(err)
				}
				if *rc.CPUPeriod != 100000 {
					t.Errorf("period %d", *rc.CPUPeriod)
				}
				return want{*rc.CPUShares, *rc.CPUQuota, *rc.Memory}
			}
			w := want{102, 20000, 64 * mi}
			if v2 {
				// cpu.weight 4 reads back as 260 shares: the conversion
				// is not exact, as runc's.
				w.shares = weightToShares(CPUSharesToWeight(102))
			}
			if got := read(); got != w {
				t.Fatalf("before: %+v, want %+v", got, w)
			}
			for _, s := range steps {
				if err := m.ResizePod(ctx, after, s.res, s.limit); err != nil {
					t.Fatal(err)
				}
				w := s.want
				if v2 {
					w.shares = weightToShares(CPUSharesToWeight(s.want.shares))
				}
				if got := read(); got != w {
					t.Errorf("after %s limit=%v: %+v, want %+v", s.res, s.limit, got, w)
				}
			}
			// The Burstable QoS cgroup's shares follow the pod's request.
			if !v2 {
				check(t, k, "cpu,cpuacct/kubepods/burstable/cpu.shares", "307")
			}
			// Usage.
			file := "memory/" + parent + "/memory.usage_in_bytes"
			if v2 {
				file = parent + "/memory.current"
			}
			k.write(filepath.FromSlash(file), "12345")
			if u, err := m.PodMemoryUsage(before); err != nil || u != 12345 {
				t.Errorf("PodMemoryUsage = %d, %v", u, err)
			}
		})
	}
}

// TestPodCgroupConfigUnlimited reads a pod cgroup without limits: quota
// -1, memory math.MaxInt64, on both versions.
func TestPodCgroupConfigUnlimited(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		k := newFakeKernel(t, v2)
		m := newManager(t, k, nil)
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		p := burstablePod("u")
		if _, err := m.EnsurePod(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		rc, err := m.PodCgroupConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		if *rc.CPUQuota != -1 || *rc.Memory != math.MaxInt64 {
			t.Errorf("v2=%v: quota %d memory %d", v2, *rc.CPUQuota, *rc.Memory)
		}
	}
}

// TestResizePodWithoutCgroupsPerQOS: no pod cgroup, nothing to do.
func TestResizePodWithoutCgroupsPerQOS(t *testing.T) {
	k := newFakeKernel(t, true)
	m := newManager(t, k, func(c *Config) { c.CgroupsPerQOS = false })
	if err := m.ResizePod(context.Background(), guaranteedPod("x"), v1.ResourceMemory, true); err != nil {
		t.Fatal(err)
	}
	if rc, err := m.PodCgroupConfig(guaranteedPod("x")); rc != nil || err != nil {
		t.Errorf("PodCgroupConfig = %v, %v", rc, err)
	}
}
