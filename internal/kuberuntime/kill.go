package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/prober"
)

// minGracePeriod is the shortest grace a container gets, as upstream.
// KillPod stops the pod's running containers, each within the grace
// period: the app containers (and any the spec does not name) in parallel
// first, then the sidecars one by one in reverse order with what is left
// of the grace period, as upstream; then its sandboxes. pod may be nil for a
// pod nodelet only knows from the runtime.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, running *kubecontainer.RunningPod, override *int64) error {
	grace := kubecontainer.GracePeriod(pod, running, override)
	deadline := m.clock.Now().Add(time.Duration(grace) * time.Second)
	sidecarOrder := map[string]int{}
	if pod != nil {
		for i := range pod.Spec.InitContainers {
			if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
				sidecarOrder[pod.Spec.InitContainers[i].Name] = i
			}
		}
	}
	var apps, sidecars []*runtimeapi.Container
	for _, c := range running.Containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if _, ok := sidecarOrder[c.GetMetadata().GetName()]; ok {
			sidecars = append(sidecars, c)
		} else {
			apps = append(apps, c)
		}
	}
	sort.Slice(sidecars, func(i, j int) bool {
		return sidecarOrder[sidecars[i].GetMetadata().GetName()] > sidecarOrder[sidecars[j].GetMetadata().GetName()]
	})
	kill := func(c *runtimeapi.Container, grace int64) error {
		name := c.GetMetadata().GetName()
		var spec *v1.Container
		if pod != nil {
			spec = specContainer(pod, name)
		}
		return m.killContainer(ctx, pod, spec, c.Id, name, running.PodIP, "Stopping container "+name, &grace)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(apps)+len(sidecars))
	for _, c := range apps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kill(c, grace); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	for _, c := range sidecars {
		left := int64(math.Ceil(deadline.Sub(m.clock.Now()).Seconds()))
		if err := kill(c, max(left, 1)); err != nil {
			errs <- err
		}
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	for _, s := range running.Sandboxes {
		if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if err := m.rt.StopPodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
			all = append(all, fmt.Errorf("stop pod sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(all...)
}

// killPodWithStatus is KillPod for a pod whose full status is at hand.
func (m *Manager) killPodWithStatus(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, override *int64) error {
	return m.KillPod(ctx, pod, RunningFromStatus(status, nil), override)
}

// RunningFromStatus turns a full status into the RunningPod that KillPod
// and RemovePod take; the grace period comes from what the runtime listed
// (listed may be nil).
func RunningFromStatus(status *kubecontainer.PodStatus, listed *kubecontainer.RunningPod) *kubecontainer.RunningPod {
	rp := &kubecontainer.RunningPod{UID: status.UID, Name: status.Name, Namespace: status.Namespace, GracePeriod: -1, PodIP: first(status.IPs)}
	if listed != nil {
		rp.GracePeriod = listed.GracePeriod
	}
	for _, s := range status.Sandboxes {
		rp.Sandboxes = append(rp.Sandboxes, &runtimeapi.PodSandbox{Id: s.Id, State: s.State, Metadata: s.Metadata})
	}
	for _, c := range status.Containers {
		rp.Containers = append(rp.Containers, &runtimeapi.Container{
			Id: c.ID, State: c.State, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: c.Attempt},
		})
	}
	return rp
}

// killContainer stops one container: its preStop hook first, then SIGTERM
// (the image's stop signal) and SIGKILL when what is left of the grace
// period ran out, both done by the runtime. The hook's time counts against
// the grace period, which never drops below 2 s.
func (m *Manager) killContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, id, name, podIP, message string, grace *int64) error {
	g := kubecontainer.GracePeriod(pod, nil, grace)
	if pod != nil {
		m.event(pod, c, v1.EventTypeNormal, "Killing", message)
	}
	if pod != nil && c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && m.cfg.Hooks != nil {
		start := m.clock.Now()
		t := prober.Target{Pod: pod, Container: c, ContainerID: id, PodIP: podIP}
		if out, err := m.cfg.Hooks.Hook(ctx, t, c.Lifecycle.PreStop, time.Duration(g)*time.Second); err != nil {
			m.event(pod, c, v1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v %s", err, out))
		}
		g = max(g-int64(m.clock.Since(start).Seconds()), kubecontainer.MinGracePeriod)
	}
	klog.FromContext(ctx).V(2).Info("Killing container", "pod", klog.KObj(pod), "container", name, "containerID", id, "gracePeriod", g, "reason", message)
	if err := m.rt.StopContainer(ctx, id, g); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %s (%s): %w", name, id, err)
	}
	m.forgetContainer(id)
	return nil
}

// RemovePod removes everything the runtime has of a stopped pod, and its
// log directory.
func (m *Manager) RemovePod(ctx context.Context, running *kubecontainer.RunningPod) error {
	var all []error
	for _, c := range running.Containers {
		if err := m.rt.RemoveContainer(ctx, c.Id); err != nil && !isNotFound(err) {
			all = append(all, fmt.Errorf("remove container %s: %w", c.Id, err))
		}
		m.forgetContainer(c.Id)
	}
	for _, s := range running.Sandboxes {
		if err := m.rt.RemovePodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
			all = append(all, fmt.Errorf("remove pod sandbox %s: %w", s.Id, err))
		}
	}
	if running.Name != "" && running.Namespace != "" {
		if err := os.RemoveAll(PodLogDir(m.cfg.PodLogsDir, running.Namespace, running.Name, running.UID)); err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
