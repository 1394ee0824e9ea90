package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/images"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/prober"
)

// PodEnv is what SyncPod needs to know about the node and the pod's volumes.
type PodEnv struct {
	HostIPs []string
	// VolumePaths maps the pod's volume names to their host paths.
	VolumePaths map[string]string
	// Probes says which containers failed liveness or startup probes.
	Probes ProbeResults
}

// SyncPod makes the runtime match pod, given what the runtime has for it
// (status, from GetPodStatus). The returned error is for failures worth a
// retry (the runtime refused a sandbox); per-container problems are in the
// result's Waiting.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, env PodEnv) (res kubecontainer.SyncResult, err error) {
	logger := klog.FromContext(ctx)
	m.initActuated(ctx, pod)
	a := computePodActions(pod, status, env.Probes, m.actuated)
	res.InitFailed = a.InitFailed
	if a.CreateSandbox && pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		// As upstream: every sync that creates a user namespaced pod's
		// sandbox, and those of them that failed.
		metrics.StartedUserNamespacedPods.Inc()
		defer func() {
			if err != nil || syncFailed(res) {
				metrics.StartedUserNamespacedPodsErrors.Inc()
			}
		}()
	}

	if len(a.RestartAll) > 0 {
		return m.restartAll(ctx, pod, status, a.RestartAll)
	}
	res.Changed = a.KillPod || a.CreateSandbox || len(a.ContainersToKill) > 0 ||
		a.NextInitContainer != nil || len(a.ContainersToStart) > 0 || len(a.ContainersToUpdate) > 0 || a.UpdatePodResources
	if a.KillPod {
		if a.CreateSandbox && len(status.Sandboxes) > 0 {
			m.event(pod, nil, v1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		if err := m.killPodWithStatus(ctx, pod, status, nil); err != nil {
			return res, fmt.Errorf("kill pod: %w", err)
		}
		if !a.CreateSandbox {
			m.prune(ctx, pod, status, nil)
			return res, nil
		}
	} else {
		for id, why := range a.ContainersToKill {
			c := specContainer(pod, why.name)
			if err := m.killContainer(ctx, pod, c, id, why.name, first(status.IPs), why.message, why.grace); err != nil {
				return res, err
			}
		}
	}

	sandboxID := a.SandboxID
	podIPs := status.IPs
	sandboxCfg, err := m.sandboxConfig(ctx, pod, a.Attempt)
	if err != nil {
		m.event(pod, nil, v1.EventTypeWarning, "FailedCreatePodSandBox", fmt.Sprintf("Failed to create pod sandbox config: %v", err))
		return res, err
	}
	if a.CreateSandbox {
		if err := os.MkdirAll(sandboxCfg.LogDirectory, 0o755); err != nil {
			return res, err
		}
		if m.cfg.DRA != nil {
			// As upstream: the claims are prepared before the sandbox;
			// the sync fails (and is retried) until they are.
			if err := m.cfg.DRA.PrepareResources(ctx, pod); err != nil {
				m.event(pod, nil, v1.EventTypeWarning, "FailedPrepareDynamicResources", fmt.Sprintf("Failed to prepare dynamic resources: %v", err))
				logger.Error(err, "Failed to prepare dynamic resources", "pod", klog.KObj(pod))
				for _, i := range a.ContainersToStart {
					res.Wait(pod.Spec.Containers[i].Name, kubecontainer.DefaultWaitingReason(pod), "")
				}
				return res, err
			}
		}
		logger.V(2).Info("Creating pod sandbox", "pod", klog.KObj(pod), "attempt", a.Attempt)
		handler, err := m.runtimeHandler(ctx, pod)
		var id string
		if err == nil {
			// Host-network sandboxes need no CNI and may be the CNI
			// daemon itself: never held up behind others.
			gated := !pod.Spec.HostNetwork
			if gated {
				err = m.gate.acquire(ctx, false)
			}
			if err == nil {
				created := m.creatingSandbox(pod.UID)
				id, err = m.rt.RunPodSandbox(ctx, sandboxCfg, handler)
				created()
				if gated {
					m.gate.release(false)
				}
			}
		}
		if err != nil {
			m.event(pod, nil, v1.EventTypeWarning, "FailedCreatePodSandBox", fmt.Sprintf("Failed to create pod sandbox: %v", err))
			for _, i := range a.ContainersToStart {
				res.Wait(pod.Spec.Containers[i].Name, kubecontainer.DefaultWaitingReason(pod), "")
			}
			return res, fmt.Errorf("create pod sandbox: %w", err)
		}
		sandboxID = id
		metrics.StartedPods.Inc()
		st, err := m.rt.PodSandboxStatus(ctx, id, false)
		if err != nil {
			return res, fmt.Errorf("pod sandbox status: %w", err)
		}
		if st.GetStatus() != nil {
			// The next GetPodStatus lists the sandbox in this state.
			m.keepSandboxStatus(st.Status)
		}
		podIPs = sandboxIPs(st.GetStatus())
	}

	// Make room first: a container about to start keeps one dead
	// predecessor (its lastState), the others their last two.
	starting := map[string]bool{}
	if c := a.NextInitContainer; c != nil {
		starting[c.Name] = true
	}
	for _, i := range a.ContainersToStart {
		starting[pod.Spec.Containers[i].Name] = true
	}
	for _, i := range a.SidecarsToStart {
		starting[pod.Spec.InitContainers[i].Name] = true
	}
	m.prune(ctx, pod, status, starting)

	// The in-place resize of the running containers and the pod cgroup,
	// before anything starts (as upstream).
	if !a.KillPod && (len(a.ContainersToUpdate) > 0 || a.UpdatePodResources) {
		if err := m.resizePod(ctx, pod, a); err != nil {
			res.ResizeError = err.Error()
		}
	}

	facts := newPodFacts(pod, podIPs, env.HostIPs)
	start := func(c *v1.Container) bool {
		w, requeue, err := m.startContainer(ctx, pod, c, status, sandboxID, sandboxCfg, facts, env.VolumePaths)
		if err != nil {
			logger.Error(err, "Failed to start container", "pod", klog.KObj(pod), "container", c.Name)
		}
		if w != nil {
			res.Wait(c.Name, w.Reason, w.Message)
			res.Requeue(requeue)
			return false
		}
		return true
	}
	for _, i := range a.EphemeralToStart {
		start(EphemeralContainer(pod, i))
	}
	if c := a.NextInitContainer; c != nil {
		if start(c) && a.SidecarStarted {
			// The next init container may start as soon as this sidecar
			// runs: look again shortly rather than at the next relist.
			res.Requeue(sidecarRecheck)
		}
		// App containers wait for the init containers.
		for _, ac := range pod.Spec.Containers {
			res.Wait(ac.Name, kubecontainer.ReasonPodInitializing, "")
		}
	} else {
		for _, i := range a.SidecarsToStart {
			start(&pod.Spec.InitContainers[i])
		}
		for _, i := range a.ContainersToStart {
			start(&pod.Spec.Containers[i])
		}
	}
	return res, nil
}

// startContainer pulls, creates and starts one container unless it is in
// back-off. A non-nil Waiting says why it did not start.
func (m *Manager) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, status *kubecontainer.PodStatus, sandboxID string,
	sandboxCfg *runtimeapi.PodSandboxConfig, facts podFacts, volumePaths map[string]string) (*kubecontainer.Waiting, time.Duration, error) {
	latest := status.Latest(c.Name)
	key := backoffKey(pod, c)
	if latest != nil && latest.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		ts := latest.FinishedAt
		if m.backoff.IsInBackOffSince(key, ts) {
			delay := m.backoff.Get(key)
			if m.firstBackoffReport(latest.ID) {
				m.event(pod, c, v1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podspec.FullName(pod)))
			}
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, c.Name, podspec.FullName(pod))
			return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCrashLoopBackOff, Message: msg}, delay - m.clock.Since(ts), nil
		}
		m.backoff.Next(key, ts)
	}

	// As upstream: the images of the volumes it mounts first; a container
	// waits for them as for its own.
	imageVolumes, err := m.ensureVolumeImages(ctx, pod, c, sandboxCfg)
	if err != nil {
		var ie *images.Error
		if errors.As(err, &ie) {
			// As upstream: the pull's events are the pod's, the
			// container's says which (Error: ErrImagePull).
			m.event(pod, c, v1.EventTypeWarning, "Failed", "Error: "+ie.Reason)
			return &kubecontainer.Waiting{Reason: ie.Reason, Message: ie.Message}, ie.RetryAfter, err
		}
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: images.ReasonErrImagePull, Message: err.Error()}, images.BackoffInitial, err
	}
	imageRef, err := m.cfg.Images.EnsureImage(ctx, pod, c, sandboxCfg)
	if err != nil {
		var ie *images.Error
		if errors.As(err, &ie) {
			return &kubecontainer.Waiting{Reason: ie.Reason, Message: ie.Message}, ie.RetryAfter, err
		}
		return &kubecontainer.Waiting{Reason: images.ReasonErrImagePull, Message: err.Error()}, images.BackoffInitial, err
	}

	restartCount := 0
	if latest != nil {
		restartCount = latest.RestartCount + 1
	} else {
		restartCount = restartCountFromLogs(PodLogDir(m.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID), c.Name)
	}
	if err := m.verifyRunAsNonRoot(ctx, pod, c, imageRef); err != nil {
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: err.Error()}, 10 * time.Second, err
	}
	cfg, err := m.containerConfig(ctx, pod, c, restartCount, imageRef, facts, volumePaths, imageVolumes)
	if err != nil {
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: err.Error()}, 10 * time.Second, err
	}
	// The pod's user namespace, as its sandbox has it; every mount is
	// idmapped with its mappings (upstream's
	// applyPlatformSpecificContainerConfig), so what the node wrote as
	// root is the pod's root's.
	if userns := sandboxCfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); userns != nil {
		cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = userns
		if userns.GetMode() == runtimeapi.NamespaceMode_POD {
			for _, mnt := range cfg.Mounts {
				mnt.UidMappings, mnt.GidMappings = userns.GetUids(), userns.GetGids()
			}
		}
	}
	if target := ephemeralTarget(pod, c); target != "" {
		// Debug containers join the target's process namespace.
		t := status.Latest(target)
		if t == nil || t.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			msg := fmt.Sprintf("target container %q is not running", target)
			return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: msg}, 10 * time.Second, errors.New(msg)
		}
		ns := cfg.Linux.SecurityContext.NamespaceOptions
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, t.ID
	}
	if err := os.MkdirAll(filepath.Join(sandboxCfg.LogDirectory, c.Name), 0o755); err != nil {
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerError, Message: err.Error()}, time.Second, err
	}
	// Created with its allocated resources: they are actuated (as
	// upstream, before the runtime is asked).
	if err := m.setActuated(pod, c); err != nil {
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: err.Error()}, 10 * time.Second, err
	}
	if err := m.gate.acquire(ctx, true); err != nil {
		return &kubecontainer.Waiting{Reason: kubecontainer.DefaultWaitingReason(pod)}, time.Second, err
	}
	id, err := m.rt.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	countImageVolumeMounts(len(imageVolumes), err)
	if err != nil {
		m.gate.release(true)
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonCreateContainerError, Message: err.Error()}, 10 * time.Second, err
	}
	m.event(pod, c, v1.EventTypeNormal, "Created", fmt.Sprintf("Created container: %s", c.Name))
	err = m.rt.StartContainer(ctx, id)
	m.gate.release(true)
	if err != nil {
		m.event(pod, c, v1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %v", err))
		return &kubecontainer.Waiting{Reason: kubecontainer.ReasonRunContainerError, Message: err.Error()}, 10 * time.Second, err
	}
	m.event(pod, c, v1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.Name))
	metrics.StartedContainers.WithLabelValues(containerType(pod, c.Name)).Inc()
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil && m.cfg.Hooks != nil {
		t := prober.Target{Pod: pod, Container: c, ContainerID: id, PodIP: first(facts.PodIPs)}
		if out, err := m.cfg.Hooks.Hook(ctx, t, c.Lifecycle.PostStart, m.cfg.RuntimeRequestTimeout); err != nil {
			msg := fmt.Sprintf("PostStartHook failed: %v %s", err, out)
			m.event(pod, c, v1.EventTypeWarning, "FailedPostStartHook", msg)
			if kerr := m.killContainer(ctx, pod, c, id, c.Name, first(facts.PodIPs), "FailedPostStartHook", nil); kerr != nil {
				return nil, 0, kerr
			}
			return &kubecontainer.Waiting{Reason: "PostStartHookError", Message: msg}, 0, err
		}
	}
	return nil, 0, nil
}

// BackoffDelay returns the current restart back-off of a container and
// whether it is in back-off now, given when it last finished.
func (m *Manager) BackoffDelay(pod *v1.Pod, c *v1.Container, finishedAt time.Time) (time.Duration, bool) {
	key := backoffKey(pod, c)
	return m.backoff.Get(key), m.backoff.IsInBackOffSince(key, finishedAt)
}

// GCBackoff drops back-off entries that expired.
func (m *Manager) GCBackoff() { m.backoff.GC() }

func backoffKey(pod *v1.Pod, c *v1.Container) string {
	return strings.Join([]string{pod.Name, pod.Namespace, string(pod.UID), c.Name, podspec.ContainerHash(c)}, "_")
}

// restartCountFromLogs recovers a container's restart count from its log
// files when the runtime lost its containers, as upstream: one more than the
// highest N of N.log.
func restartCountFromLogs(podLogDir, name string) int {
	entries, err := os.ReadDir(filepath.Join(podLogDir, name))
	if err != nil {
		return 0
	}
	count := 0
	for _, e := range entries {
		base := strings.SplitN(e.Name(), ".", 2)[0]
		if n, err := strconv.Atoi(base); err == nil && n+1 > count {
			count = n + 1
		}
	}
	return count
}

// removeContainerLogs removes a removed container's log file and its
// rotated ones (<path>.<timestamp>[.gz]).
func removeContainerLogs(logPath string) {
	if logPath == "" {
		return
	}
	_ = os.Remove(logPath)
	rotated, _ := filepath.Glob(logPath + ".*")
	for _, p := range rotated {
		_ = os.Remove(p)
	}
}

// prune removes dead containers beyond the newest two per name (the current
// one and the previous, which status reports as lastState; only one for the
// names in starting, whose new container becomes the current one), with
// their log files, and sandboxes that are neither the newest nor ready nor
// hold containers any more.
func (m *Manager) prune(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, starting map[string]bool) {
	logger := klog.FromContext(ctx)
	seen := map[string]int{}
	removed := map[string]bool{}
	for _, cs := range status.Containers {
		seen[cs.Name]++
		keep := 2
		if starting[cs.Name] {
			keep = 1
		}
		if seen[cs.Name] <= keep || cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if err := m.rt.RemoveContainer(ctx, cs.ID); err != nil && !isNotFound(err) {
			logger.Error(err, "Failed to remove dead container", "pod", klog.KObj(pod), "containerID", cs.ID)
			continue
		}
		m.forgetContainer(cs.ID)
		removeContainerLogs(cs.LogPath)
		if cs.TerminationMessageHostPath != "" {
			_ = os.Remove(cs.TerminationMessageHostPath)
		}
		removed[cs.ID] = true
	}
	for i, s := range status.Sandboxes {
		if i == 0 || s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		busy := false
		for _, cs := range status.Containers {
			if cs.SandboxID == s.Id && !removed[cs.ID] {
				busy = true
				break
			}
		}
		if !busy {
			if err := m.rt.RemovePodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
				logger.Error(err, "Failed to remove old pod sandbox", "pod", klog.KObj(pod), "sandboxID", s.Id)
			}
		}
	}
}

func specContainer(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return EphemeralContainer(pod, i)
		}
	}
	return nil
}

// EphemeralContainer is the i-th ephemeral container as a Container.
func EphemeralContainer(pod *v1.Pod, i int) *v1.Container {
	return (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
}

// ephemeralTarget is the container whose process namespace an ephemeral
// container c joins, if any.
func ephemeralTarget(pod *v1.Pod, c *v1.Container) string {
	for i := range pod.Spec.EphemeralContainers {
		if e := &pod.Spec.EphemeralContainers[i]; e.Name == c.Name {
			return e.TargetContainerName
		}
	}
	return ""
}

func (m *Manager) event(pod *v1.Pod, c *v1.Container, typ, reason, msg string) {
	if m.cfg.Recorder == nil || pod == nil {
		return
	}
	m.cfg.Recorder.Event(podspec.ContainerRef(pod, c), typ, reason, msg)
}

// sidecarRecheck is how soon a pod is synced again after a sidecar started
// during initialization.
const sidecarRecheck = 100 * time.Millisecond

// containerType is the container_type label upstream's metrics use.
func containerType(pod *v1.Pod, name string) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return "init_container"
		}
	}
	return "container"
}

// syncFailed: a container of the sync could not be created or started (it
// waits for another reason than its turn), as upstream's sync results
// with an error.
func syncFailed(res kubecontainer.SyncResult) bool {
	for _, w := range res.Waiting {
		switch w.Reason {
		case kubecontainer.ReasonContainerCreating, kubecontainer.ReasonPodInitializing:
		default:
			return true
		}
	}
	return false
}

// ensureVolumeImages makes the images of the image volumes c mounts present
// and returns their CRI image specs by volume name; a failure is the first
// volume's that failed (an *images.Error).
func (m *Manager) ensureVolumeImages(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxCfg *runtimeapi.PodSandboxConfig) (map[string]*runtimeapi.ImageSpec, error) {
	var out map[string]*runtimeapi.ImageSpec
	for _, vm := range c.VolumeMounts {
		v := podspec.VolumeNamed(&pod.Spec, vm.Name)
		if v == nil || v.Image == nil || out[vm.Name] != nil {
			continue
		}
		ref, err := m.cfg.Images.EnsureVolumeImage(ctx, pod, v.Image, sandboxCfg)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]*runtimeapi.ImageSpec{}
		}
		out[vm.Name] = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: v.Image.Reference, Annotations: pod.Annotations}
	}
	return out, nil
}

// countImageVolumeMounts counts a container's image volumes after its
// create, as upstream's incrementImageVolumeMetrics: an error when the
// runtime said it could not mount one, a success otherwise.
func countImageVolumeMounts(n int, createErr error) {
	if n == 0 {
		return
	}
	metrics.ImageVolumeRequested.Add(float64(n))
	if createErr != nil && strings.HasPrefix(grpcstatus.Convert(createErr).Message(), crierrors.ErrImageVolumeMountFailed.Error()) {
		metrics.ImageVolumeMountedErrors.Add(float64(n))
		return
	}
	metrics.ImageVolumeMountedSucceed.Add(float64(n))
}

// restartAll runs a RestartAllContainers reset: every container of the pod
// is stopped (gracefully, preStop hooks included) and removed, in
// RestartAllOrder, so that the next sync, asked for at once, starts the pod
// again from its first init container in the same sandbox. The log files
// stay: they carry the restart counts (restartCountFromLogs).
func (m *Manager) restartAll(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, sources []string) (kubecontainer.SyncResult, error) {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Restarting all containers of the pod", "pod", klog.KObj(pod), "sources", sources)
	res := kubecontainer.SyncResult{Changed: true, RestartedAll: true}
	for _, name := range RestartAllOrder(pod, sources) {
		c := specContainer(pod, name)
		for _, cs := range status.Containers {
			if cs.Name != name {
				continue
			}
			if cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				msg := fmt.Sprintf("Container %s is restarted with all the pod's containers (RestartAllContainers after %s exited)", name, strings.Join(sources, ", "))
				if err := m.killContainer(ctx, pod, c, cs.ID, name, first(status.IPs), msg, nil); err != nil {
					return res, err
				}
			}
			if err := m.rt.RemoveContainer(ctx, cs.ID); err != nil && !isNotFound(err) {
				return res, fmt.Errorf("remove container %s of %s: %w", cs.ID, name, err)
			}
			m.forgetContainer(cs.ID)
			if cs.TerminationMessageHostPath != "" {
				_ = os.Remove(cs.TerminationMessageHostPath)
			}
		}
	}
	res.Requeue(time.Millisecond)
	return res, nil
}
