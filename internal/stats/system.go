package stats

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/machine"
)

// SystemContainer is a cgroup the summary reports among the node's system
// containers, as upstream's "kubelet" (kubeletCgroups, else the kubelet's
// own cgroup), "runtime" (--runtime-cgroups) and "misc" (systemCgroups).
type SystemContainer struct {
	// Name is the summary's name: statsv1alpha1.SystemContainerKubelet, ...
	Name string
	// Cgroup is the cgroup's path in the hierarchy ("/kubelet.slice").
	Cgroup string
	// Start is the container's start time; zero: the cgroup directory's
	// modification time.
	Start time.Time
}

// sysPrefix prefixes a system container's key in the rate cache.
const sysPrefix = "sys/"

// readCgroupAt reads cgroup id's CPU and memory (id a path in the
// hierarchy, "/kubelet.slice"), as readRootCgroup reads the root's: on v1
// the cpuacct and memory hierarchies, the hierarchical total_* counters.
func readCgroupAt(cg machine.Cgroups, id string) (cgroupSample, error) {
	if cg.Mount == "" {
		return cgroupSample{}, errors.New("no cgroup mount")
	}
	if cg.V2 {
		dir := cg.Dir("", id)
		if _, err := os.Stat(dir); err != nil {
			return cgroupSample{}, err
		}
		return readCgroup2(dir, 0, "")
	}
	var s cgroupSample
	var errs []error
	if v, err := readUint(filepath.Join(cg.Dir("cpuacct", id), "cpuacct.usage")); err == nil {
		s.hasCPU, s.cpuNanos = true, v
	} else {
		errs = append(errs, fmt.Errorf("cpu: %w", err))
	}
	if err := readMemory1(cg.Dir("memory", id), &s); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// cgroupStart is when cgroup id's directory last changed: what a system
// container without a known start reports (cadvisor reports the cgroup's
// creation).
func cgroupStart(cg machine.Cgroups, id string) time.Time {
	controller := "memory"
	if cg.V2 {
		controller = ""
	}
	fi, err := os.Stat(cg.Dir(controller, id))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// systemContainerStats is a system container's entry of the summary: its
// CPU (with the rate once known, else 0) and memory with their PSI; no
// filesystems, no available memory (system containers are not limited).
func (b *builder) systemContainerStats(name, cgroup string, start time.Time) (statsv1alpha1.ContainerStats, bool) {
	cs, ok := b.s.system[name]
	if !ok {
		return statsv1alpha1.ContainerStats{}, false
	}
	cg := b.p.cfg.Machine.Cgroups
	pr, err := readPressure(cg, cgroup)
	if err != nil {
		b.logger.V(4).Info("Cannot read a system container's PSI", "container", name, "cgroup", cgroup, "err", err)
	}
	if start.IsZero() {
		start = cgroupStart(cg, cgroup)
	}
	out := statsv1alpha1.ContainerStats{Name: name, StartTime: metav1.NewTime(start)}
	at := metav1.NewTime(b.s.at)
	if cs.hasCPU {
		out.CPU = &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(cs.cpuNanos), UsageNanoCores: ptr(b.rates[sysPrefix+name]), PSI: pr.cpu}
	}
	if cs.hasMemory {
		out.Memory = &statsv1alpha1.MemoryStats{
			Time: at, UsageBytes: ptr(cs.usage), WorkingSetBytes: ptr(cs.workingSet), RSSBytes: ptr(cs.rss),
			PageFaults: ptr(cs.pgfault), MajorPageFaults: ptr(cs.pgmajfault), PSI: pr.memory,
		}
	}
	return out, true
}
