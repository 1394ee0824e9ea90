package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ResizePod gives the pod's cgroup one part of PodConfig(pod) (pod with
// its new allocation) during an in-place resize, as upstream's
// setPodCgroupConfig: for CPU the quota and period (limit) or the shares
// (request, also counted in the Burstable QoS cgroup's shares); for
// memory the limit (a memory request is written nowhere). Without
// cgroupsPerQOS there is no pod cgroup.
func (m *Manager) ResizePod(ctx context.Context, pod *v1.Pod, res v1.ResourceName, limit bool) error {
	if !m.cfg.CgroupsPerQOS {
		return nil
	}
	rc := m.PodConfig(pod)
	part := &ResourceConfig{}
	switch {
	case res == v1.ResourceMemory && limit:
		if rc.Memory == nil {
			return nil
		}
		part.Memory = rc.Memory
	case res == v1.ResourceMemory:
		return nil
	case res == v1.ResourceCPU && limit:
		part.CPUQuota, part.CPUPeriod = rc.CPUQuota, rc.CPUPeriod
		if part.CPUQuota == nil {
			unlimited := int64(-1)
			part.CPUQuota = &unlimited
		}
	case res == v1.ResourceCPU:
		part.CPUShares = rc.CPUShares
	default:
		return fmt.Errorf("cgroups: %s is not resized in place", res)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if res == v1.ResourceCPU && !limit {
		m.trackBurstableLocked(ctx, pod)
	}
	if err := m.apply(m.PodCgroupName(pod), part); err != nil {
		return fmt.Errorf("set the %s of pod cgroup %s: %w", res, m.Name(m.PodCgroupName(pod)), err)
	}
	return nil
}

// PodCgroupConfig reads the pod cgroup's current CPU shares, quota and
// period and memory limit, as upstream's GetPodCgroupConfig: no limit is
// a quota of -1 and a memory limit of math.MaxInt64. Without
// cgroupsPerQOS there is no pod cgroup: the result is nil.
func (m *Manager) PodCgroupConfig(pod *v1.Pod) (*ResourceConfig, error) {
	if !m.cfg.CgroupsPerQOS {
		return nil, nil
	}
	p := filepath.FromSlash(m.Name(m.PodCgroupName(pod)))
	rc := &ResourceConfig{}
	var errs []error
	set := func(dst **int64, v int64, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = &v
	}
	if m.v2 {
		dir := filepath.Join(m.cfg.Machine.Cgroups.Mount, p)
		w, err := readInt(dir, "cpu.weight")
		if err == nil {
			w = weightToShares(w)
		}
		set(&rc.CPUShares, w, err)
		q, period, err := readCPUMax(dir)
		set(&rc.CPUQuota, q, err)
		set(&rc.CPUPeriod, period, err)
		mem, err := readInt(dir, "memory.max")
		set(&rc.Memory, mem, err)
		return rc, errors.Join(errs...)
	}
	cpu := filepath.Join(m.hierarchyWith("cpu.shares"), p)
	v, err := readInt(cpu, "cpu.shares")
	set(&rc.CPUShares, v, err)
	v, err = readInt(cpu, "cpu.cfs_quota_us")
	set(&rc.CPUQuota, v, err)
	v, err = readInt(cpu, "cpu.cfs_period_us")
	set(&rc.CPUPeriod, v, err)
	v, err = readInt(filepath.Join(m.hierarchyWith("memory.limit_in_bytes"), p), "memory.limit_in_bytes")
	set(&rc.Memory, v, err)
	return rc, errors.Join(errs...)
}

// PodMemoryUsage is the pod cgroup's memory usage in bytes (memory.current
// or memory.usage_in_bytes), as upstream's GetPodCgroupMemoryUsage.
func (m *Manager) PodMemoryUsage(pod *v1.Pod) (int64, error) {
	p := filepath.FromSlash(m.Name(m.PodCgroupName(pod)))
	if m.v2 {
		return readInt(filepath.Join(m.cfg.Machine.Cgroups.Mount, p), "memory.current")
	}
	return readInt(filepath.Join(m.hierarchyWith("memory.limit_in_bytes"), p), "memory.usage_in_bytes")
}

// readInt reads a cgroup file holding one number ("max": math.MaxInt64;
// v1's unlimited memory is a page-aligned MaxInt64, returned as
// math.MaxInt64 too).
func readInt(dir, file string) (int64, error) {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return math.MaxInt64, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", filepath.Join(dir, file), err)
	}
	if file == "memory.limit_in_bytes" && v >= math.MaxInt64-(1<<20) {
		v = math.MaxInt64
	}
	return v, nil
}

// readCPUMax reads cpu.max: the quota (-1 for "max") and the period.
func readCPUMax(dir string) (int64, int64, error) {
	p := filepath.Join(dir, "cpu.max")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("parse %s: %q", p, data)
	}
	quota := int64(-1)
	if f[0] != "max" {
		if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", p, err)
		}
	}
	period, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse %s: %w", p, err)
	}
	return quota, period, nil
}

// weightToShares is the inverse of CPUSharesToWeight, as runc's (and
// upstream's cgroup v2 reader) conversion.
func weightToShares(weight int64) int64 {
	return ((weight-1)*262142)/9999 + 2
}
