package eviction

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// PodStats finds a pod's stats in a summary.
type PodStats func(pod *v1.Pod) (statsv1alpha1.PodStats, bool)

// StatsOf is the PodStats of a summary's pods, by UID.
func StatsOf(s *statsv1alpha1.Summary) PodStats {
	byUID := make(map[string]statsv1alpha1.PodStats, len(s.Pods))
	for _, ps := range s.Pods {
		byUID[ps.PodRef.UID] = ps
	}
	return func(pod *v1.Pod) (statsv1alpha1.PodStats, bool) {
		ps, ok := byUID[string(pod.UID)]
		return ps, ok
	}
}

// fsPart is a part of a pod's local storage a disk signal measures.
type fsPart int

const (
	fsRoot    fsPart = iota // the containers' writable layers
	fsLogs                  // the containers' logs
	fsVolumes               // local volumes: emptyDir (on disk), hostPath
)

// diskParts are the parts of a pod's storage a disk signal counts, as
// upstream: with a dedicated image filesystem, nodefs counts the logs and
// local volumes and imagefs the writable layers; on one filesystem every
// signal counts them all.
func diskParts(s Signal, dedicatedImageFs bool) []fsPart {
	if !dedicatedImageFs {
		return []fsPart{fsRoot, fsLogs, fsVolumes}
	}
	switch s {
	case NodeFsAvailable, NodeFsInodesFree:
		return []fsPart{fsLogs, fsVolumes}
	}
	return []fsPart{fsRoot}
}

// podCmp orders two pods for eviction: negative when a goes first.
type podCmp func(a, b *v1.Pod) int

// Rank orders pods for eviction under the signal, first to evict first, as
// upstream: memory by usage above requests, then priority, then usage
// minus requests; disk the same with the local storage the signal counts;
// PIDs by priority, then process count. Pods without stats go first.
func Rank(pods []*v1.Pod, s Signal, stats PodStats, dedicatedImageFs bool) {
	var order []podCmp
	switch s.Resource() {
	case v1.ResourceMemory:
		use := func(p *v1.Pod, ps statsv1alpha1.PodStats) resource.Quantity { return *memoryUsage(ps.Memory) }
		order = []podCmp{exceedsRequests(stats, v1.ResourceMemory, use), byPriority, aboveRequests(stats, v1.ResourceMemory, use)}
	case ResourcePIDs:
		order = []podCmp{byPriority, byProcesses(stats)}
	default:
		parts := diskParts(s, dedicatedImageFs)
		r := s.Resource()
		use := func(p *v1.Pod, ps statsv1alpha1.PodStats) resource.Quantity { return podDiskUsage(p, ps, parts)[r] }
		// As upstream, the request compared is ephemeral-storage for inodes too.
		order = []podCmp{exceedsRequests(stats, v1.ResourceEphemeralStorage, use), byPriority, aboveRequests(stats, v1.ResourceEphemeralStorage, use)}
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int {
		for _, c := range order {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
}

// firstTrue orders true before false.
func firstTrue(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// withStats compares pods by their stats; a pod without stats goes first.
func withStats(stats PodStats, f func(a *v1.Pod, as statsv1alpha1.PodStats, b *v1.Pod, bs statsv1alpha1.PodStats) int) podCmp {
	return func(a, b *v1.Pod) int {
		as, aok := stats(a)
		bs, bok := stats(b)
		if !aok || !bok {
			return firstTrue(!aok, !bok)
		}
		return f(a, as, b, bs)
	}
}

type usageFunc func(p *v1.Pod, ps statsv1alpha1.PodStats) resource.Quantity

func request(p *v1.Pod, r v1.ResourceName) resource.Quantity {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})[r]
}

// exceedsRequests puts the pods using more than they request first.
func exceedsRequests(stats PodStats, r v1.ResourceName, use usageFunc) podCmp {
	return withStats(stats, func(a *v1.Pod, as statsv1alpha1.PodStats, b *v1.Pod, bs statsv1alpha1.PodStats) int {
		ua, ub := use(a, as), use(b, bs)
		ra, rb := request(a, r), request(b, r)
		return firstTrue(ua.Cmp(ra) > 0, ub.Cmp(rb) > 0)
	})
}

// aboveRequests puts the pods using the most above their requests first.
func aboveRequests(stats PodStats, r v1.ResourceName, use usageFunc) podCmp {
	return withStats(stats, func(a *v1.Pod, as statsv1alpha1.PodStats, b *v1.Pod, bs statsv1alpha1.PodStats) int {
		ua, ub := use(a, as), use(b, bs)
		ua.Sub(request(a, r))
		ub.Sub(request(b, r))
		return ub.Cmp(ua)
	})
}

// byPriority puts the lowest priority first.
func byPriority(a, b *v1.Pod) int { return cmp.Compare(priority(a), priority(b)) }

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// byProcesses puts the pods with the most processes first.
func byProcesses(stats PodStats) podCmp {
	return withStats(stats, func(_ *v1.Pod, as statsv1alpha1.PodStats, _ *v1.Pod, bs statsv1alpha1.PodStats) int {
		return cmp.Compare(processes(bs.ProcessStats), processes(as.ProcessStats))
	})
}

func processes(ps *statsv1alpha1.ProcessStats) uint64 {
	if ps == nil || ps.ProcessCount == nil {
		return 0
	}
	return *ps.ProcessCount
}

func memoryUsage(m *statsv1alpha1.MemoryStats) *resource.Quantity {
	if m == nil || m.WorkingSetBytes == nil {
		return resource.NewQuantity(0, resource.BinarySI)
	}
	return resource.NewQuantity(int64(*m.WorkingSetBytes), resource.BinarySI)
}

func diskUsage(fs *statsv1alpha1.FsStats) *resource.Quantity {
	if fs == nil || fs.UsedBytes == nil {
		return resource.NewQuantity(0, resource.BinarySI)
	}
	return resource.NewQuantity(int64(*fs.UsedBytes), resource.BinarySI)
}

func inodeUsage(fs *statsv1alpha1.FsStats) *resource.Quantity {
	if fs == nil || fs.InodesUsed == nil {
		return resource.NewQuantity(0, resource.DecimalSI)
	}
	return resource.NewQuantity(int64(*fs.InodesUsed), resource.DecimalSI)
}

// podDiskUsage is the space and inodes the pod's parts use.
func podDiskUsage(p *v1.Pod, ps statsv1alpha1.PodStats, parts []fsPart) v1.ResourceList {
	space := resource.NewQuantity(0, resource.BinarySI)
	inodes := resource.NewQuantity(0, resource.DecimalSI)
	add := func(fs *statsv1alpha1.FsStats) {
		space.Add(*diskUsage(fs))
		inodes.Add(*inodeUsage(fs))
	}
	for _, part := range parts {
		switch part {
		case fsRoot:
			for _, c := range ps.Containers {
				add(c.Rootfs)
			}
		case fsLogs:
			for _, c := range ps.Containers {
				add(c.Logs)
			}
		case fsVolumes:
			local := map[string]bool{}
			for _, v := range p.Spec.Volumes {
				if v.HostPath != nil || podspec.IsLocalEphemeralVolume(&v) {
					local[v.Name] = true
				}
			}
			for i := range ps.VolumeStats {
				if local[ps.VolumeStats[i].Name] {
					add(&ps.VolumeStats[i].FsStats)
				}
			}
		}
	}
	return v1.ResourceList{v1.ResourceEphemeralStorage: *space, ResourceInodes: *inodes}
}

// evictable reports whether the pod may be evicted at all.
func evictable(p *v1.Pod) bool { return !IsCritical(p) && !podspec.IsTerminal(p.Status.Phase) }
