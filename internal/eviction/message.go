package eviction

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// The annotations of an eviction's event, as upstream.
const (
	AnnotationOffendingContainers      = "offending_containers"
	AnnotationOffendingContainersUsage = "offending_containers_usage"
	AnnotationStarvedResource          = "starved_resource"
)

// The signals of the local storage limits in kubelet_evictions, as upstream.
const (
	SignalEmptyDirFsLimit           = "emptydirfs.limit"
	SignalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	SignalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// Message is the message of a pod evicted for the threshold t (observed as
// o), and its event's annotations, as upstream: the resource, the
// threshold and what was available, and each container using more than it
// requests.
func Message(t Threshold, o Observation, pod *v1.Pod, ps statsv1alpha1.PodStats, found bool) (string, map[string]string) {
	r := t.Signal.Resource()
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %v. ", r)
	if o.Available != nil && o.Capacity != nil {
		fmt.Fprintf(&b, "Threshold quantity: %v, available: %v. ", t.Value.Of(o.Capacity), o.Available)
	}
	ann := map[string]string{}
	if !found {
		return b.String(), ann
	}
	containers := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	var names, usages []string
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[r]
			var use *resource.Quantity
			switch r {
			case v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
					use = resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
				}
			case v1.ResourceMemory:
				if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
					use = resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
				}
			}
			if use != nil && use.Cmp(req) > 0 {
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, use, req.String(), r)
				names = append(names, c.Name)
				usages = append(usages, use.String())
			}
			break
		}
	}
	ann[AnnotationOffendingContainers] = strings.Join(names, ",")
	ann[AnnotationOffendingContainersUsage] = strings.Join(usages, ",")
	ann[AnnotationStarvedResource] = string(r)
	return b.String(), ann
}

// LocalStorageViolation is a pod over one of its local storage limits.
type LocalStorageViolation struct {
	// Signal is kubelet_evictions' label (SignalEmptyDirFsLimit, ...).
	Signal  string
	Message string
}

// CheckLocalStorage reports the first local storage limit the pod is over,
// as upstream checks them: an emptyDir over its sizeLimit (in memory too:
// upstream's InPlacePodVerticalScalingMemoryBackedVolumes is off), the pod
// over the sum of its containers' ephemeral-storage limits, a container
// (or sidecar) over its own (its logs, and its writable layer when the
// images are on the node's filesystem).
func CheckLocalStorage(pod *v1.Pod, ps statsv1alpha1.PodStats, dedicatedImageFs bool) (LocalStorageViolation, bool) {
	used := map[string]*resource.Quantity{}
	for i := range ps.VolumeStats {
		used[ps.VolumeStats[i].Name] = diskUsage(&ps.VolumeStats[i].FsStats)
	}
	for _, v := range pod.Spec.Volumes {
		ed := v.EmptyDir
		if ed == nil || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		if u := used[v.Name]; u != nil && u.Cmp(*ed.SizeLimit) > 0 {
			return LocalStorageViolation{SignalEmptyDirFsLimit,
				fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, ed.SizeLimit.String())}, true
		}
	}
	if limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		total := resource.NewQuantity(0, resource.BinarySI)
		if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
			total = diskUsage(ps.EphemeralStorage)
		}
		if total.Cmp(limit) > 0 {
			return LocalStorageViolation{SignalEphemeralPodFsLimit,
				fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", limit.String())}, true
		}
	}
	limits := map[string]*resource.Quantity{}
	for i := range pod.Spec.Containers {
		if l := pod.Spec.Containers[i].Resources.Limits.StorageEphemeral(); l.Value() != 0 {
			limits[pod.Spec.Containers[i].Name] = l
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if l := c.Resources.Limits.StorageEphemeral(); podspec.IsSidecar(c) && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cs := range ps.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		u := diskUsage(cs.Logs)
		if !dedicatedImageFs {
			u.Add(*diskUsage(cs.Rootfs))
		}
		if limit.Cmp(*u) < 0 {
			return LocalStorageViolation{SignalEphemeralContainerFsLimit,
				fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", cs.Name, limit.String())}, true
		}
	}
	return LocalStorageViolation{}, false
}

// HasLocalStorageLimits reports whether the pod has a limit
// CheckLocalStorage checks: only then are the pods' stats needed without
// pressure.
func HasLocalStorageLimits(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if ed := v.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if l := list[i].Resources.Limits.StorageEphemeral(); l.Value() != 0 {
				return true
			}
		}
	}
	return false
}
