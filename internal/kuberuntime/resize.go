package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/allocation/state"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

// PodCgroupResizer resizes a running pod's cgroup during an in-place
// resize (cgroups.Manager).
type PodCgroupResizer interface {
	// PodConfig is the pod cgroup's configuration for pod's resources.
	PodConfig(pod *v1.Pod) *cgroups.ResourceConfig
	// PodCgroupConfig reads the pod cgroup's current configuration (nil
	// without a pod cgroup).
	PodCgroupConfig(pod *v1.Pod) (*cgroups.ResourceConfig, error)
	// PodMemoryUsage is the pod cgroup's memory usage.
	PodMemoryUsage(pod *v1.Pod) (int64, error)
	// ResizePod writes the CPU or memory limit (limit) or request part of
	// PodConfig(pod).
	ResizePod(ctx context.Context, pod *v1.Pod, res v1.ResourceName, limit bool) error
}

// resourceValues are a container's resizable resources, upstream's
// resourceRequirements: memory in bytes, CPU in milli-CPU, 0 when unset.
type resourceValues struct {
	memoryLimit, memoryRequest, cpuLimit, cpuRequest int64
}

func valuesOf(r *v1.ResourceRequirements) resourceValues {
	return resourceValues{
		memoryLimit:   r.Limits.Memory().Value(),
		memoryRequest: r.Requests.Memory().Value(),
		cpuLimit:      r.Limits.Cpu().MilliValue(),
		cpuRequest:    r.Requests.Cpu().MilliValue(),
	}
}

// requirements are v as resource lists (values 0 left out).
func (v resourceValues) requirements() v1.ResourceRequirements {
	var r v1.ResourceRequirements
	add := func(list *v1.ResourceList, name v1.ResourceName, q *resource.Quantity, n int64) {
		if n == 0 {
			return
		}
		if *list == nil {
			*list = v1.ResourceList{}
		}
		(*list)[name] = *q
	}
	add(&r.Limits, v1.ResourceCPU, resource.NewMilliQuantity(v.cpuLimit, resource.DecimalSI), v.cpuLimit)
	add(&r.Limits, v1.ResourceMemory, resource.NewQuantity(v.memoryLimit, resource.BinarySI), v.memoryLimit)
	add(&r.Requests, v1.ResourceCPU, resource.NewMilliQuantity(v.cpuRequest, resource.DecimalSI), v.cpuRequest)
	add(&r.Requests, v1.ResourceMemory, resource.NewQuantity(v.memoryRequest, resource.BinarySI), v.memoryRequest)
	return r
}

// containerUpdate is one running container to resize in place
// (upstream's containerToUpdateInfo): current is updated as the runtime
// accepts each resource.
type containerUpdate struct {
	container *v1.Container
	id        string
	desired   resourceValues
	current   *resourceValues
}

// Actuated is the resources nodelet last gave each container
// (actuated_pods_state, as upstream's): a resize is what the allocation
// has and they do not.
type Actuated = state.State

// resizeAction decides a running container's in-place resize, as
// upstream's computePodResizeAction: nothing when its allocated resources
// (c, from the allocated pod) are those actuated; else, per resource, a
// restart when its resizePolicy says RestartContainer (the container is
// killed; it reports false so that the caller starts it again) or an
// update through the runtime (decreases ordered before increases).
func resizeAction(pod *v1.Pod, c *v1.Container, cs *kubecontainer.ContainerStatus, actuated *Actuated, a *podActions) (keep bool) {
	if actuated == nil || cs.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return true
	}
	// A missing record is taken as nothing actuated (an idempotent update,
	// or a restart), as upstream.
	was, _ := actuated.Container(pod.UID, c.Name)
	desired, current := valuesOf(&c.Resources), valuesOf(&was)
	if desired == current {
		return true
	}
	decide := func(name v1.ResourceName, want, have int64) (resize, restart bool) {
		if want == have {
			return false, false
		}
		for _, p := range c.ResizePolicy {
			if p.ResourceName == name {
				return true, p.RestartPolicy == v1.RestartContainer
			}
		}
		return true, false
	}
	mark := func(name v1.ResourceName, want, have int64) {
		if a.ContainersToUpdate == nil {
			a.ContainersToUpdate = map[v1.ResourceName][]containerUpdate{}
		}
		u := containerUpdate{container: c, id: cs.ID, desired: desired, current: &current}
		if want > have {
			a.ContainersToUpdate[name] = append(a.ContainersToUpdate[name], u)
		} else {
			a.ContainersToUpdate[name] = append([]containerUpdate{u}, a.ContainersToUpdate[name]...)
		}
	}
	resizeMemLim, restartMemLim := decide(v1.ResourceMemory, desired.memoryLimit, current.memoryLimit)
	resizeMemReq, restartMemReq := decide(v1.ResourceMemory, desired.memoryRequest, current.memoryRequest)
	resizeCPULim, restartCPULim := decide(v1.ResourceCPU, desired.cpuLimit, current.cpuLimit)
	resizeCPUReq, restartCPUReq := decide(v1.ResourceCPU, desired.cpuRequest, current.cpuRequest)
	if restartMemLim || restartMemReq || restartCPULim || restartCPUReq {
		a.ContainersToKill[cs.ID] = killReason{name: c.Name, message: fmt.Sprintf("Container %s resize requires restart", c.Name)}
		a.UpdatePodResources = true
		return false
	}
	switch {
	case resizeMemLim:
		mark(v1.ResourceMemory, desired.memoryLimit, current.memoryLimit)
	case resizeMemReq:
		mark(v1.ResourceMemory, desired.memoryRequest, current.memoryRequest)
	}
	switch {
	case resizeCPULim:
		mark(v1.ResourceCPU, desired.cpuLimit, current.cpuLimit)
	case resizeCPUReq:
		mark(v1.ResourceCPU, desired.cpuRequest, current.cpuRequest)
	}
	return true
}

// startingResized reports whether a container about to be (re)started
// has other resources than actuated: the pod cgroup is resized first, as
// upstream's startingResizedContainer.
func startingResized(pod *v1.Pod, cs []*v1.Container, actuated *Actuated) bool {
	if actuated == nil {
		return false
	}
	for _, c := range cs {
		was, _ := actuated.Container(pod.UID, c.Name)
		if valuesOf(&c.Resources) != valuesOf(&was) {
			return true
		}
	}
	return false
}

// initActuated records a pod's allocated resources as actuated when it has
// no record (its first sync, or a pod that ran before nodelet kept one),
// as upstream's InitializeActuatedPod.
func (m *Manager) initActuated(ctx context.Context, pod *v1.Pod) {
	if _, ok := m.actuated.Pod(pod.UID); ok {
		return
	}
	if err := m.actuated.SetPod(pod.UID, state.InfoForPod(pod)); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to initialize actuated pod resource info checkpoint", "pod", klog.KObj(pod))
	}
}

// setActuated records the resources a container was created or updated
// with.
func (m *Manager) setActuated(pod *v1.Pod, c *v1.Container) error {
	return m.actuated.SetContainer(pod.UID, c.Name, c.Resources)
}

// ForgetActuated drops a removed pod's actuated resources.
func (m *Manager) ForgetActuated(ctx context.Context, keep func(types.UID) bool) {
	if err := m.actuated.RemoveOrphans(keep); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to remove pods from actuated state")
	}
}

// ResizeInProgress reports whether a running resizable container of the
// allocated pod has other CPU or memory requests or limits than actuated,
// as upstream's IsPodResizeInProgress (containers not running are sized
// when they start).
func (m *Manager) ResizeInProgress(allocatedPod *v1.Pod, rs *kubecontainer.PodStatus) bool {
	for _, cs := range [][]v1.Container{allocatedPod.Spec.InitContainers, allocatedPod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			st := rs.Latest(c.Name)
			if st == nil || st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			was, _ := m.actuated.Container(allocatedPod.UID, c.Name)
			if valuesOf(&c.Resources) != valuesOf(&was) {
				return true
			}
		}
	}
	return false
}

// resizePod actuates the pod's in-place resize, as upstream's
// doPodResizeAction: memory then CPU; for each, the pod cgroup grown
// before the containers and shrunk after them; a memory limit is never
// set below the current usage (checked first, so that nothing is half
// done). An error stops it: the next sync goes on from what was actuated.
func (m *Manager) resizePod(ctx context.Context, pod *v1.Pod, a podActions) (err error) {
	logger := klog.FromContext(ctx)
	start := m.clock.Now()
	defer func() {
		metrics.PodResizeDurationMilliseconds.WithLabelValues(strconv.FormatBool(err == nil)).Observe(float64(m.clock.Since(start).Milliseconds()))
	}()
	pcm := m.cfg.PodResizer
	var desired, current *cgroups.ResourceConfig
	if pcm != nil {
		desired = pcm.PodConfig(pod)
		if current, err = pcm.PodCgroupConfig(pod); err != nil {
			logger.Error(err, "Unable to get pod cgroup config", "pod", klog.KObj(pod))
			return fmt.Errorf("unable to get pod cgroup config for pod %q: %w", podspec.FullName(pod), err)
		}
	}
	if err := m.validateMemoryResize(ctx, pod, a, current, desired); err != nil {
		logger.Error(err, "Allocated pod resize is not currently feasible", "pod", klog.KObj(pod))
		return err
	}
	setPod := func(res v1.ResourceName, limit bool) error {
		if err := pcm.ResizePod(ctx, pod, res, limit); err != nil {
			logger.Error(err, "Failed to set cgroup config", "resource", res, "pod", klog.KObj(pod))
			return err
		}
		return nil
	}
	resize := func(res v1.ResourceName, curLim, newLim, curReq, newReq int64) error {
		if current != nil && newLim > curLim {
			if err := setPod(res, true); err != nil {
				return err
			}
		}
		if current != nil && newReq > curReq {
			if err := setPod(res, false); err != nil {
				return err
			}
		}
		if err := m.updateContainers(ctx, pod, res, a.ContainersToUpdate[res]); err != nil {
			logger.Error(err, "updatePodContainerResources failed", "pod", klog.KObj(pod), "resource", res)
			return err
		}
		if current != nil && newReq < curReq {
			if err := setPod(res, false); err != nil {
				return err
			}
		}
		if current != nil && newLim < curLim {
			if err := setPod(res, true); err != nil {
				return err
			}
		}
		return nil
	}
	var curMem, newMem, curQuota, newQuota, curShares, newShares int64
	if current != nil {
		curMem, curQuota, curShares = deref(current.Memory, math.MaxInt64), deref(current.CPUQuota, -1), deref(current.CPUShares, 0)
		// An unset limit keeps the current one: removing a limit is not
		// supported (as upstream).
		newMem, newQuota, newShares = deref(desired.Memory, curMem), deref(desired.CPUQuota, curQuota), deref(desired.CPUShares, curShares)
		if curQuota < 0 {
			curQuota = math.MaxInt64
		}
		if newQuota < 0 {
			newQuota = math.MaxInt64
		}
	}
	if len(a.ContainersToUpdate[v1.ResourceMemory]) > 0 || a.UpdatePodResources {
		if err := resize(v1.ResourceMemory, curMem, newMem, 0, 0); err != nil {
			return err
		}
	}
	if len(a.ContainersToUpdate[v1.ResourceCPU]) > 0 || a.UpdatePodResources {
		if err := resize(v1.ResourceCPU, curQuota, newQuota, curShares, newShares); err != nil {
			return err
		}
	}
	return nil
}

func deref(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

// validateMemoryResize refuses memory limits below the current usage,
// the pod's and its containers', as upstream's validateMemoryResizeAction.
func (m *Manager) validateMemoryResize(ctx context.Context, pod *v1.Pod, a podActions, current, desired *cgroups.ResourceConfig) error {
	if len(a.ContainersToUpdate[v1.ResourceMemory]) == 0 && !a.UpdatePodResources {
		return nil
	}
	podDecreasing := current != nil && desired.Memory != nil && (current.Memory == nil || *desired.Memory < *current.Memory)
	decreasing := map[string]int64{}
	ids := map[string]string{}
	for _, u := range a.ContainersToUpdate[v1.ResourceMemory] {
		if u.desired.memoryLimit != 0 && (u.current == nil || u.current.memoryLimit == 0 || u.desired.memoryLimit < u.current.memoryLimit) {
			decreasing[u.container.Name] = u.desired.memoryLimit
			ids[u.container.Name] = u.id
		}
	}
	if !podDecreasing && len(decreasing) == 0 {
		return nil
	}
	var errs []error
	if podDecreasing {
		usage, err := m.cfg.PodResizer.PodMemoryUsage(pod)
		switch {
		case err != nil:
			errs = append(errs, errors.New("missing pod memory usage"))
		case usage >= *desired.Memory:
			errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", *desired.Memory, usage))
		}
	}
	for name, limit := range decreasing {
		st, err := m.rt.ContainerStats(ctx, ids[name])
		if err != nil || st.GetMemory().GetUsageBytes() == nil {
			errs = append(errs, fmt.Errorf("missing container %q memory usage", name))
			continue
		}
		if usage := st.GetMemory().GetUsageBytes().GetValue(); usage >= uint64(limit) {
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", name, limit, usage))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("cannot decrease memory limits: %w", aggregate(errs))
}

// aggregate joins errors as apimachinery's aggregate prints them: one
// alone, else "[a, b]".
func aggregate(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msg := "["
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return errors.New(msg + "]")
}

// updateContainers gives running containers their new CPU or memory
// (res) through CRI UpdateContainerResources, in order; the other
// resource stays as last actuated. Each accepted update is recorded as
// actuated; the first failure stops.
func (m *Manager) updateContainers(ctx context.Context, pod *v1.Pod, res v1.ResourceName, updates []containerUpdate) error {
	for _, u := range updates {
		next := *u.current
		switch res {
		case v1.ResourceMemory:
			next.memoryLimit, next.memoryRequest = u.desired.memoryLimit, u.desired.memoryRequest
		case v1.ResourceCPU:
			next.cpuLimit, next.cpuRequest = u.desired.cpuLimit, u.desired.cpuRequest
		}
		c := u.container.DeepCopy()
		c.Resources = next.requirements()
		lr := m.containerResources(ctx, pod, c)
		if err := m.rt.UpdateContainerResources(ctx, u.id, &runtimeapi.ContainerResources{Linux: lr}); err != nil {
			klog.FromContext(ctx).Error(err, "updateContainerResources failed", "container", c.Name, "cID", u.id, "pod", klog.KObj(pod), "resourceName", res)
			return err
		}
		// The runtime's answer about it changed.
		m.forgetStatus(u.id)
		if err := m.setActuated(pod, c); err != nil {
			return err
		}
		*u.current = next
	}
	return nil
}
