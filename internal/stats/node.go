package stats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodelet/nodelet/internal/machine"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// cgroupSample is one reading of a cgroup's cumulative CPU time and memory.
type cgroupSample struct {
	hasCPU   bool
	cpuNanos uint64 // cumulative CPU time, ns

	hasMemory  bool
	usage      uint64
	workingSet uint64
	rss        uint64
	pgfault    uint64
	pgmajfault uint64
}

// workingSet is usage minus the inactive file pages, clamped at 0, as
// cAdvisor computes it.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

// readRootCgroup reads the root cgroup's CPU and memory where cgroups are
// mounted: the cgroup v2 unified hierarchy, or the cgroup v1 cpuacct and
// memory hierarchies. When a cgroup v2 root has no memory.current, its usage
// is memTotal minus MemFree of procRoot's meminfo.
func readRootCgroup(cg machine.Cgroups, memTotal uint64, procRoot string) (cgroupSample, error) {
	if cg.Mount == "" {
		return cgroupSample{}, errors.New("no cgroup mount")
	}
	if cg.V2 {
		return readCgroup2(cg.Mount, memTotal, procRoot)
	}
	return readCgroup1(cg.Mount)
}

func readCgroup1(root string) (cgroupSample, error) {
	var s cgroupSample
	var errs []error
	cpuErr := errors.New("no cpuacct hierarchy")
	for _, d := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu", "cpu"} {
		v, err := readUint(filepath.Join(root, d, "cpuacct.usage"))
		if err == nil {
			s.hasCPU, s.cpuNanos, cpuErr = true, v, nil
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			cpuErr = err
		}
	}
	if cpuErr != nil {
		errs = append(errs, fmt.Errorf("cpu: %w", cpuErr))
	}

	if err := readMemory1(filepath.Join(root, "memory"), &s); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// readMemory1 reads a v1 memory cgroup's usage into s. A cgroup's own
// counters leave out its children: the hierarchical total_* ones are the
// whole subtree's.
func readMemory1(dir string, s *cgroupSample) error {
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	s.hasMemory = true
	s.usage = usage
	s.workingSet = workingSet(usage, stat["total_inactive_file"])
	s.rss = stat["total_rss"]
	s.pgfault = stat["total_pgfault"]
	s.pgmajfault = stat["total_pgmajfault"]
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

func readCgroup2(root string, memTotal uint64, procRoot string) (cgroupSample, error) {
	var s cgroupSample
	var errs []error
	cpu, err := readKeyValues(filepath.Join(root, "cpu.stat"))
	if v, ok := cpu["usage_usec"]; err == nil && ok {
		s.hasCPU, s.cpuNanos = true, v*1000
	} else {
		if err == nil {
			err = errors.New("no usage_usec in cpu.stat")
		}
		errs = append(errs, fmt.Errorf("cpu: %w", err))
	}

	// The root cgroup has no memory.current: usage is then MemTotal-MemFree,
	// as runc reports it for the root.
	usage, err := readUint(filepath.Join(root, "memory.current"))
	if err != nil {
		mi, merr := readMeminfo(procRoot)
		if merr != nil {
			errs = append(errs, fmt.Errorf("memory: %w", merr))
			return s, errors.Join(errs...)
		}
		if memTotal >= mi["MemFree"] {
			usage = memTotal - mi["MemFree"]
		}
	}
	stat, err := readKeyValues(filepath.Join(root, "memory.stat"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	s.hasMemory = true
	s.usage = usage
	s.workingSet = workingSet(usage, stat["inactive_file"])
	s.rss = stat["anon"]
	s.pgfault = stat["pgfault"]
	s.pgmajfault = stat["pgmajfault"]
	return s, errors.Join(errs...)
}

// readMeminfo returns /proc/meminfo in bytes: what changes (MemFree, swap);
// MemTotal is a machine fact.
func readMeminfo(procRoot string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64)
	for line := range strings.Lines(string(b)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		out[name] = v
	}
	return out, nil
}

// ifaceCounters is one line of /proc/net/dev.
type ifaceCounters struct {
	name                                 string
	rxBytes, rxErrors, txBytes, txErrors uint64
}

// parseNetDev parses /proc/net/dev into the counters the summary reports.
func parseNetDev(r io.Reader) ([]ifaceCounters, error) {
	lines, err := parseNetDevFull(r)
	if err != nil {
		return nil, err
	}
	out := make([]ifaceCounters, 0, len(lines))
	for _, l := range lines {
		out = append(out, ifaceCounters{name: l.name, rxBytes: l.v[0], rxErrors: l.v[2], txBytes: l.v[8], txErrors: l.v[10]})
	}
	return out, nil
}

// ignoredInterface reports the interfaces cAdvisor leaves out of a network
// namespace's stats.
func ignoredInterface(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// defaultInterfaceName is the interface reported at the top level of
// NetworkStats, as upstream.
const defaultInterfaceName = "eth0"

// rlimit is the node's task limit and count.
type rlimit struct {
	maxPID, procs       int64
	hasMaxPID, hasProcs bool
}

// readRlimit returns min(kernel.pid_max, kernel.threads-max) and the number
// of tasks from /proc/loadavg, as upstream's pidlimit does.
func readRlimit(procRoot string) rlimit {
	var r rlimit
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		v, err := readUint(filepath.Join(procRoot, f))
		if err != nil || v > uint64(1<<62) {
			continue
		}
		if !r.hasMaxPID || int64(v) < r.maxPID {
			r.maxPID, r.hasMaxPID = int64(v), true
		}
	}
	if b, err := os.ReadFile(filepath.Join(procRoot, "loadavg")); err == nil {
		// "0.00 0.01 0.05 2/123 4567": the fourth field is running/total.
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, total, ok := strings.Cut(f[3], "/"); ok {
				if n, err := strconv.ParseInt(total, 10, 64); err == nil {
					r.procs, r.hasProcs = n, true
				}
			}
		}
	}
	return r
}

// readUint reads a file holding one unsigned integer.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readKeyValues reads a flat-keyed cgroup file ("key value" lines), such as
// memory.stat or cpu.stat. Values that do not parse are skipped.
func readKeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, nil
}

// podsMemory is the memory of the pods' cgroup (kubepods).
type podsMemory struct {
	usage, workingSet uint64
	limit             uint64 // 0: none
}

// readPodsMemory reads the pods' cgroup, named as the cgroupfs driver
// spells it ("/kubepods"), under the cgroup mount: on v1 in the memory
// hierarchy (usage_in_bytes, the hierarchical total_inactive_file,
// limit_in_bytes), on v2 memory.current, inactive_file and memory.max.
func readPodsMemory(cg machine.Cgroups, name string) (podsMemory, error) {
	var m podsMemory
	if cg.Mount == "" || name == "" {
		return m, errors.New("no pods cgroup")
	}
	dir := cg.Dir("memory", name)
	if cg.V2 {
		usage, err := readUint(filepath.Join(dir, "memory.current"))
		if err != nil {
			return m, err
		}
		stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return m, err
		}
		m.usage, m.workingSet = usage, workingSet(usage, stat["inactive_file"])
		if b, err := os.ReadFile(filepath.Join(dir, "memory.max")); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				m.limit = v
			}
		}
		return m, nil
	}
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return m, err
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return m, err
	}
	m.usage, m.workingSet = usage, workingSet(usage, stat["total_inactive_file"])
	// No limit reads as the largest page-aligned int64.
	if v, err := readUint(filepath.Join(dir, "memory.limit_in_bytes")); err == nil && v < 1<<62 {
		m.limit = v
	}
	return m, nil
}

// podCgroupIDs lists the pods' cgroup and every cgroup below it (QoS
// classes, pods, sandboxes, containers) by their path in the hierarchy
// ("/kubepods/burstable/pod<uid>/<id>"), parents first: the memory
// hierarchy's on v1. None without a pods' cgroup.
func podCgroupIDs(cg machine.Cgroups, podsCgroup string) []string {
	if cg.Mount == "" || podsCgroup == "" {
		return nil
	}
	var ids []string
	base := cg.Dir("memory", "/")
	_ = filepath.WalkDir(cg.Dir("memory", podsCgroup), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(base, path)
		ids = append(ids, "/"+filepath.ToSlash(rel))
		return nil
	})
	return ids
}

// NodeMemoryUsage is the node's memory usage (page cache included) as the
// summary reports it, read alone: the memory notifiers of the eviction
// manager compare it with their levels between observations.
func (p *Provider) NodeMemoryUsage() (int64, error) {
	s, err := readRootCgroup(p.cfg.Machine.Cgroups, uint64(p.cfg.Machine.MemoryCapacity), p.cfg.ProcRoot)
	if !s.hasMemory {
		return 0, err
	}
	return int64(s.usage), nil
}

// PodsMemoryUsage is the pods' cgroup's memory usage (page cache
// included), as the summary's "pods" system container reports it.
func (p *Provider) PodsMemoryUsage() (int64, error) {
	m, err := readPodsMemory(p.cfg.Machine.Cgroups, p.cfg.PodsCgroup)
	return int64(m.usage), err
}

// QuickSummary is the part of the summary that costs a syscall or two:
// the node filesystem (statfs of the root directory) and the PID figures.
// The eviction manager reads it every second between its observations.
func (p *Provider) QuickSummary() (*statsv1alpha1.Summary, error) {
	now := p.clock.Now()
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.cfg.NodeName}}
	var errs []error
	if p.cfg.RootDir != "" {
		fi, err := statfs(p.cfg.RootDir)
		if err != nil {
			errs = append(errs, err)
		} else {
			s.Node.Fs = fi.fsStats(now)
		}
	}
	if r := readRlimit(p.cfg.ProcRoot); r.hasMaxPID && r.hasProcs {
		s.Node.Rlimit = &statsv1alpha1.RlimitStats{Time: metav1.NewTime(now), MaxPID: ptr(r.maxPID), NumOfRunningProcesses: ptr(r.procs)}
	}
	return s, errors.Join(errs...)
}
