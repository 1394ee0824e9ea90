package eviction

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Observation is one signal as measured: what is available of its
// capacity, and when.
type Observation struct {
	Available, Capacity *resource.Quantity
	Time                time.Time
}

// Observations are the signals measured at once.
type Observations map[Signal]Observation

// Observe reads the signals from a stats summary, as upstream: memory from
// the node's working set, the allocatable memory from the pods' cgroup,
// nodefs from the filesystem of the root directory, imagefs and
// containerfs from the runtime's filesystems, PIDs from pid_max and the
// number of tasks. A signal the summary lacks is absent.
func Observe(s *statsv1alpha1.Summary) Observations {
	out := Observations{}
	bytes := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.BinarySI) }
	count := func(v uint64) *resource.Quantity { return resource.NewQuantity(int64(v), resource.DecimalSI) }
	if m := s.Node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		out[MemoryAvailable] = Observation{bytes(*m.AvailableBytes), bytes(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
	}
	for _, c := range s.Node.SystemContainers {
		if m := c.Memory; c.Name == statsv1alpha1.SystemContainerPods && m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			out[AllocatableMemoryAvailable] = Observation{bytes(*m.AvailableBytes), bytes(*m.AvailableBytes + *m.WorkingSetBytes), m.Time.Time}
		}
	}
	fs := func(f *statsv1alpha1.FsStats, space, inodes Signal) {
		if f == nil {
			return
		}
		if f.AvailableBytes != nil && f.CapacityBytes != nil {
			out[space] = Observation{bytes(*f.AvailableBytes), bytes(*f.CapacityBytes), f.Time.Time}
		}
		if f.InodesFree != nil && f.Inodes != nil {
			out[inodes] = Observation{count(*f.InodesFree), count(*f.Inodes), f.Time.Time}
		}
	}
	fs(s.Node.Fs, NodeFsAvailable, NodeFsInodesFree)
	if r := s.Node.Runtime; r != nil {
		fs(r.ImageFs, ImageFsAvailable, ImageFsInodesFree)
		fs(r.ContainerFs, ContainerFsAvailable, ContainerFsInodesFree)
	}
	if r := s.Node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		free := int64(*r.MaxPID) - int64(*r.NumOfRunningProcesses)
		out[PIDAvailable] = Observation{resource.NewQuantity(free, resource.DecimalSI), count(uint64(*r.MaxPID)), r.Time.Time}
	}
	return out
}

// Met reports whether the threshold is met by what is observed: the
// available amount below the threshold's value (plus its minimum reclaim
// when withMinReclaim, for a threshold already met). A signal not observed
// never meets a threshold.
func (t Threshold) Met(obs Observations, withMinReclaim bool) bool {
	o, ok := obs[t.Signal]
	if !ok {
		return false
	}
	q := t.Value.Of(o.Capacity)
	if withMinReclaim && t.MinReclaim != nil {
		q.Add(*t.MinReclaim.Of(o.Capacity))
	}
	return q.Cmp(*o.Available) > 0
}
