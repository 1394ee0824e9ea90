package kuberuntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/podspec"
)

// containerEnv is what the container's environment and the pod's facts
// that env can refer to.
type podFacts struct {
	PodIPs  []string
	HostIPs []string
}

// newPodFacts are the pod's facts for its containers: a host-network pod
// has the node's IPs as its own (status.podIP in env, hooks' and probes'
// address), as upstream's status reports them.
func newPodFacts(pod *v1.Pod, podIPs, hostIPs []string) podFacts {
	if pod.Spec.HostNetwork && len(podIPs) == 0 {
		podIPs = hostIPs
	}
	return podFacts{PodIPs: podIPs, HostIPs: hostIPs}
}

func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, imageRef string,
	facts podFacts, volumePaths map[string]string, imageVolumes map[string]*runtimeapi.ImageSpec) (*runtimeapi.ContainerConfig, error) {
	envs, invalid, err := m.buildEnv(ctx, pod, c, facts, volumePaths)
	if err != nil {
		return nil, err
	}
	if len(invalid) > 0 {
		m.event(pod, c, v1.EventTypeWarning, "InvalidEnvironmentVariableNames",
			fmt.Sprintf("Keys [%s] from the EnvFrom configMap or secret were skipped since they are invalid environment variable names.", strings.Join(invalid, ", ")))
	}
	lookup := func(name string) (string, bool) {
		for i := len(envs) - 1; i >= 0; i-- {
			if envs[i].Key == name {
				return string(envs[i].Value), true
			}
		}
		return "", false
	}
	cmd := make([]string, len(c.Command))
	for i, s := range c.Command {
		cmd[i] = expand(s, lookup)
	}
	args := make([]string, len(c.Args))
	for i, s := range c.Args {
		args[i] = expand(s, lookup)
	}
	mounts, err := m.containerMounts(pod, c, volumePaths, imageVolumes, lookup, m.SupportsRRO(ctx, pod))
	if err != nil {
		return nil, err
	}
	devices := containerDevices(c, volumePaths)
	annotations := containerAnnotations(pod, c, restartCount)
	var cdi []*runtimeapi.CDIDevice
	if m.cfg.DevicePlugins != nil {
		dp, err := m.cfg.DevicePlugins.ContainerResources(ctx, pod, c)
		if err != nil {
			return nil, err
		}
		// As upstream: the plugins' env first (the container's own wins),
		// their mounts after the volumes'.
		envs = append(dp.Envs, envs...)
		mounts = append(mounts, dp.Mounts...)
		devices = append(devices, dp.Devices...)
		for k, v := range dp.Annotations {
			if _, ok := annotations[k]; !ok {
				annotations[k] = v
			}
		}
		cdi = dp.CDIDevices
	}
	if m.cfg.DRA != nil {
		// As upstream: the claims' CDI devices after the device plugins'.
		ids, err := m.cfg.DRA.ContainerCDIDevices(pod, c)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			cdi = append(cdi, &runtimeapi.CDIDevice{Name: id})
		}
	}
	if !mountedAt(mounts, "/etc/hosts") {
		hosts, err := m.etcHostsMount(pod, facts.PodIPs)
		if err != nil {
			return nil, err
		}
		if hosts != nil {
			mounts = append(mounts, hosts)
		}
	}
	sc, err := m.containerSecurityContext(pod, c)
	if err != nil {
		return nil, err
	}
	stop, err := m.stopSignal(c)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     cmd,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Labels:      containerLabels(pod, c),
		Annotations: annotations,
		Mounts:      mounts,
		Devices:     devices,
		CDIDevices:  cdi,
		LogPath:     filepath.Join(c.Name, fmt.Sprintf("%d.log", restartCount)),
		StopSignal:  stop,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       m.containerResources(ctx, pod, c),
			SecurityContext: sc,
		},
	}
	if m.cfg.CPUs != nil && cfg.Linux.Resources != nil {
		// As upstream's PreCreateContainer: the CPU manager's cpuset.
		if set := m.cfg.CPUs.ContainerCPUs(string(pod.UID), c.Name); !set.IsEmpty() {
			cfg.Linux.Resources.CpusetCpus = set.String()
		}
	}
	if m.cfg.Mems != nil && cfg.Linux.Resources != nil {
		// As upstream's PreCreateContainer: the memory manager's NUMA nodes.
		if mems := m.cfg.Mems.ContainerMems(ctx, pod, c.Name); mems != "" {
			cfg.Linux.Resources.CpusetMems = mems
		}
	}
	return cfg, nil
}

// stopSignal is c's lifecycle.stopSignal for CRI (RUNTIME_DEFAULT when
// unset), as upstream's getContainerConfigStopSignal; refused while the
// ContainerStopSignals gate is off, rather than ignored.
func (m *Manager) stopSignal(c *v1.Container) (runtimeapi.Signal, error) {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT, nil
	}
	sig := string(*c.Lifecycle.StopSignal)
	if !m.cfg.ContainerStopSignals {
		return 0, fmt.Errorf("lifecycle.stopSignal %s needs the feature gate ContainerStopSignals, which is off on this node", sig)
	}
	v, ok := runtimeapi.Signal_value[criSignalName(sig)]
	if !ok || v == int32(runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT) {
		return 0, fmt.Errorf("lifecycle.stopSignal %s is not a signal the runtime knows", sig)
	}
	return runtimeapi.Signal(v), nil
}

// criSignalName is the CRI enum name of a signal ("SIGRTMAX-2" is
// SIGNAL_SIGRTMAXMINUS2), signalName its reverse: upstream's
// signalNameToRuntimeEnum table, as a rule.
func criSignalName(sig string) string {
	return "SIGNAL_" + strings.NewReplacer("-", "MINUS", "+", "PLUS").Replace(sig)
}

func signalName(s runtimeapi.Signal) v1.Signal {
	return v1.Signal(strings.NewReplacer("MINUS", "-", "PLUS", "+").Replace(strings.TrimPrefix(s.String(), "SIGNAL_")))
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// containerMounts are c's volume mounts and its termination message file;
// imageVolumes are the images of the image volumes it mounts, by volume
// name (ensureVolumeImages); supportsRRO: the pod's runtime handler can
// make mounts recursively read-only.
func (m *Manager) containerMounts(pod *v1.Pod, c *v1.Container, volumePaths map[string]string, imageVolumes map[string]*runtimeapi.ImageSpec,
	env func(string) (string, bool), supportsRRO bool) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		host, ok := volumePaths[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q is not prepared", vm.Name)
		}
		rro, err := podspec.ResolveRecursiveReadOnly(vm, supportsRRO)
		if err != nil {
			return nil, fmt.Errorf("failed to resolve recursive read-only mode: %w", err)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, env)
		}
		mount := &runtimeapi.Mount{
			ContainerPath:     vm.MountPath,
			Readonly:          vm.ReadOnly || readOnlyVolume(pod, vm.Name),
			RecursiveReadOnly: rro,
			Propagation:       propagation(vm.MountPropagation),
		}
		switch image := imageVolumes[vm.Name]; {
		case image != nil:
			// The runtime mounts the image (its subPath, which it
			// resolves inside the image and refuses when missing).
			if err := checkSubPath(sub); err != nil {
				return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
			}
			mount.Image, mount.ImageSubPath = image, sub
		case sub != "":
			p, err := subPathHost(host, sub)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
			}
			mount.HostPath = p
		default:
			mount.HostPath = host
		}
		mounts = append(mounts, mount)
	}
	// The termination message file, mounted where the spec says.
	if c.TerminationMessagePath != "" && !mountedAt(mounts, c.TerminationMessagePath) {
		dir := filepath.Join(m.cfg.PodsDir, string(pod.UID), "containers", c.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		var id [4]byte
		_, _ = rand.Read(id[:])
		path := filepath.Join(dir, hex.EncodeToString(id[:]))
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		f.Close()
		// Writable by whichever user the container runs as.
		if err := os.Chmod(path, 0o666); err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: path})
	}
	return mounts, nil
}

// checkSubPath refuses an absolute subPath or one with '..', as upstream.
func checkSubPath(sub string) error {
	if filepath.IsAbs(sub) || strings.Contains("/"+sub+"/", "/../") {
		return fmt.Errorf("subPath %q must be a relative path without '..'", sub)
	}
	return nil
}

// subPathHost is the host path of sub inside the volume at root, created
// as a directory when missing. As upstream, a subPath may not be absolute,
// hold '..', or lead out of the volume through a symlink (one a container
// could have planted).
func subPathHost(root, sub string) (string, error) {
	if err := checkSubPath(sub); err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	within := func(p string) bool {
		return p == realRoot || strings.HasPrefix(p, realRoot+string(filepath.Separator))
	}
	full := filepath.Join(root, sub)
	// Resolve the deepest existing part before creating anything.
	existing := full
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		existing = filepath.Dir(existing)
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	if !within(real) {
		return "", fmt.Errorf("subPath %q leads out of the volume (to %s)", sub, real)
	}
	if existing != full {
		// As upstream: the directories created get the volume root's mode
		// (setgid and sticky bits included, umask ignored), so that an fsGroup shares them
		// as it shares the volume.
		info, err := os.Stat(realRoot)
		if err != nil {
			return "", err
		}
		perm := info.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSetuid | os.ModeSticky)
		rel, err := filepath.Rel(existing, full)
		if err != nil {
			return "", err
		}
		dir := existing
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
				return "", err
			}
			if err := os.Chmod(dir, perm); err != nil {
				return "", err
			}
		}
	}
	if real, err = filepath.EvalSymlinks(full); err != nil || !within(real) {
		return "", fmt.Errorf("subPath %q leads out of the volume", sub)
	}
	return real, nil
}

func mountedAt(mounts []*runtimeapi.Mount, p string) bool {
	for _, m := range mounts {
		if m.ContainerPath == p {
			return true
		}
	}
	return false
}

func propagation(p *v1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	default:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
}

// containerResources is the container's CRI linux resources (cpu shares,
// CFS quota and period, memory and hugepage limits, oom_score_adj, swap),
// as upstream computes them: see cgroups.ContainerResources. A LimitedSwap
// container whose swap cannot be computed gets none, with upstream's error
// logged.
func (m *Manager) containerResources(ctx context.Context, pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	opts := m.cfg.Resources
	if cgroups.SwapBehavior(pod, c, opts) == cgroups.LimitedSwap {
		if _, err := cgroups.LimitedSwapBytes(c.Resources.Requests.Memory().Value(), opts.MemoryCapacity, opts.SwapCapacity); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot calculate swap allocation amount; disallowing swap")
		}
	}
	return cgroups.ContainerResources(pod, c, opts)
}

func (m *Manager) containerSecurityContext(pod *v1.Pod, c *v1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	seccomp, err := m.seccompProfile(pod, c)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	if err := checkAppArmor(pod, c); err != nil {
		return nil, err
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		policy, err := supplementalGroupsPolicy(psc)
		if err != nil {
			return nil, err
		}
		sc.SupplementalGroupsPolicy = policy
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
	}
	csc := c.SecurityContext
	if csc == nil {
		return sc, nil
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, c := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(c))
		}
		for _, c := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(c))
		}
	}
	if csc.ProcMount != nil && *csc.ProcMount == v1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	}
	return sc, nil
}

// SupportsRRO reports whether the pod's runtime handler makes recursive
// read-only mounts (CRI Status's handler features), as upstream's
// runtimeClassSupportsRecursiveReadOnlyMounts.
func (m *Manager) SupportsRRO(ctx context.Context, pod *v1.Pod) bool {
	if !requestsRRO(pod) {
		// Nothing to resolve: no RuntimeClass lookup on every status.
		return false
	}
	handler, err := m.runtimeHandler(ctx, pod)
	if err != nil {
		return false
	}
	f, known := m.features.Handler(ctx, handler)
	return known && f.GetRecursiveReadOnlyMounts()
}

// requestsRRO: a volume mount of the pod asks for recursive read-only
// (Enabled or IfPossible), the only case the runtime's support matters.
func requestsRRO(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, vm := range c.VolumeMounts {
				if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled {
					return true
				}
			}
		}
	}
	return false
}

// supplementalGroupsPolicy is the pod's supplementalGroupsPolicy for CRI
// (Merge when unset), as upstream's; a runtime that cannot honour Strict
// never gets the pod (admission refuses it).
func supplementalGroupsPolicy(psc *v1.PodSecurityContext) (runtimeapi.SupplementalGroupsPolicy, error) {
	if psc == nil || psc.SupplementalGroupsPolicy == nil {
		return runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*psc.SupplementalGroupsPolicy)]
	if !ok {
		return 0, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", *psc.SupplementalGroupsPolicy)
	}
	return runtimeapi.SupplementalGroupsPolicy(v), nil
}

// readOnlyVolume reports whether the pod's volume named name is always
// mounted read-only (podspec.ReadOnlyVolume).
func readOnlyVolume(pod *v1.Pod, name string) bool {
	v := podspec.VolumeNamed(&pod.Spec, name)
	return v != nil && podspec.ReadOnlyVolume(v)
}

// containerDevices are the container's volumeDevices: each block volume's
// device on the host (where its plugin published it) at its devicePath,
// readable, writable and mknod-able, as upstream's makeDevices.
func containerDevices(c *v1.Container, volumePaths map[string]string) []*runtimeapi.Device {
	var out []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		if p, ok := volumePaths[d.Name]; ok {
			out = append(out, &runtimeapi.Device{HostPath: p, ContainerPath: d.DevicePath, Permissions: "mrw"})
		}
	}
	return out
}
