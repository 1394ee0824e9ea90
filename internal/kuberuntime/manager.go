package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/allocation/state"
	"github.com/nodelet/nodelet/internal/cgroups"
	"github.com/nodelet/nodelet/internal/kubecontainer"
	"github.com/nodelet/nodelet/internal/prober"
)

// Container restart back-off, as upstream: 10 s doubling to 300 s (or to
// crashLoopBackOff.maxContainerRestartPeriod, the first delay no longer
// than it), reset after a container ran cleanly for 600 s.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 300 * time.Second
	backoffReset   = 600 * time.Second
)

// crashLoopBackOff is the container restart back-off for a maximum delay
// (0: upstream's default, 300 s), as upstream's newCrashLoopBackOff.
func crashLoopBackOff(maxDelay time.Duration, clk clock.Clock) *flowcontrol.Backoff {
	if maxDelay <= 0 {
		maxDelay = BackoffMax
	}
	b := flowcontrol.NewFakeBackOff(min(BackoffInitial, maxDelay), maxDelay, clk)
	b.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > backoffReset
	}
	return b
}

// ImageEnsurer makes a container's image, or an image volume's, present
// and returns its reference (images.Puller).
type ImageEnsurer interface {
	EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, error)
	EnsureVolumeImage(ctx context.Context, pod *v1.Pod, src *v1.ImageVolumeSource, sandbox *runtimeapi.PodSandboxConfig) (string, error)
}

// HookRunner runs lifecycle hooks (postStart, preStop).
type HookRunner interface {
	Hook(ctx context.Context, t prober.Target, h *v1.LifecycleHandler, timeout time.Duration) (string, error)
}

// Config configures a Manager.
type Config struct {
	// Runtime is the CRI runtime service.
	Runtime internalapi.RuntimeService
	// Images makes containers' images present.
	Images ImageEnsurer
	// Hooks runs lifecycle hooks; nil runs none.
	Hooks HookRunner
	// Recorder gets the upstream events (Created, Started, Killing, BackOff...).
	Recorder record.EventRecorder
	// Clock times the restart back-off and grace periods (the real clock
	// when nil).
	Clock clock.Clock
	// PodLogsDir is podLogsDir: /var/log/pods by default.
	PodLogsDir string
	// RootDir is the root dir (<root-dir>/seccomp holds Localhost seccomp
	// profiles).
	RootDir string
	// CrashLoopBackOffMax is crashLoopBackOff.maxContainerRestartPeriod:
	// the longest container restart back-off (0: 300 s).
	CrashLoopBackOffMax time.Duration
	// SeccompDefault is seccompDefault: containers without a seccomp
	// profile of their own or their pod's run with RuntimeDefault, not
	// Unconfined.
	SeccompDefault bool
	// ContainerStopSignals is the feature gate of that name: containers'
	// lifecycle.stopSignal goes to the runtime and their status reports
	// the runtime's stop signal. Off, a container with a stopSignal is
	// refused (CreateContainerConfigError) rather than stopped with
	// another signal.
	ContainerStopSignals bool
	// MaxParallelStarts bounds the sandboxes and containers being created
	// at once (see startGate): 0 means max(8, 2 x CPUs), negative no limit.
	MaxParallelStarts int
	// PodsDir is <root-dir>/pods: per-pod directories (termination message
	// files, emptyDir volumes).
	PodsDir string
	// DNS is the resolver configuration given to pod sandboxes.
	DNS DNSConfig
	// RuntimeRequestTimeout bounds each non-streaming CRI call.
	RuntimeRequestTimeout time.Duration
	// Resources are the node facts and settings of containers' CRI linux
	// resources (memory capacity, CFS period, hugepage sizes, cgroup v2).
	Resources cgroups.ResourceOptions
	// PodCgroups creates a pod's cgroup before its sandbox and names it
	// (the sandbox's CgroupParent); nil leaves it to the runtime.
	PodCgroups PodCgroups
	// Objects gives ConfigMaps and Secrets for env; nil in standalone mode.
	Objects ObjectGetter
	// ServiceEnv gives the service variables; nil means none.
	ServiceEnv ServiceEnv
	// RuntimeHandlers maps RuntimeClass names to CRI handlers; nil refuses
	// pods with a runtimeClassName.
	RuntimeHandlers RuntimeHandlers
	// NodeAllocatable stands in for limits that are not set in
	// resourceFieldRef; nil means none.
	NodeAllocatable func() v1.ResourceList
	// DevicePlugins gives containers the devices assigned to them; nil
	// gives none.
	DevicePlugins DevicePlugins
	// DRA prepares the pods' ResourceClaims before their sandboxes and
	// gives containers their claims' CDI devices (dra.Manager); nil: no
	// dynamic resources (pods with claims are refused at admission).
	DRA DynamicResources
	// UserNamespaces gives pods with hostUsers: false their user
	// namespace's ID mappings (userns.Manager); nil refuses them.
	UserNamespaces UserNamespaces
	// PodResizer resizes pod cgroups during in-place resizes; nil: only
	// the containers are resized (no pod cgroups).
	PodResizer PodCgroupResizer
	// CPUs gives each container the cpuset it is created with (the CPU
	// manager); nil or an empty set leaves it to the runtime.
	CPUs ContainerCPUs
	// Mems gives each container the cpuset.mems it is created with (the
	// memory manager); nil or "" leaves it to the runtime.
	Mems ContainerMems
}

// ContainerMems is the memory manager's answer for a container being
// created: the NUMA nodes of its pinned memory ("": none).
type ContainerMems interface {
	ContainerMems(ctx context.Context, pod *v1.Pod, container string) string
}

// ContainerCPUs is the CPU manager's answer for a container being created:
// its exclusive CPUs or the shared pool (empty: no cpuset).
type ContainerCPUs interface {
	ContainerCPUs(podUID, container string) cpuset.CPUSet
}

// UserNamespaces allocates the pods' user namespaces (userns.Manager).
type UserNamespaces interface {
	GetOrCreateUserNamespaceMappings(ctx context.Context, pod *v1.Pod, runtimeHandler string) (*runtimeapi.UserNamespace, error)
}

// DynamicResources are the DRA manager's answers: a pod's claims prepared
// by their drivers, and the CDI devices of a container's claims.
type DynamicResources interface {
	PrepareResources(ctx context.Context, pod *v1.Pod) error
	ContainerCDIDevices(pod *v1.Pod, c *v1.Container) ([]string, error)
}

// DevicePlugins is what a container's device plugin resources add to its
// CRI config (devices, mounts, envs, annotations, CDI devices).
type DevicePlugins interface {
	ContainerResources(ctx context.Context, pod *v1.Pod, c *v1.Container) (*runtimeapi.ContainerConfig, error)
}

// Manager talks to the container runtime on behalf of the pod workers.
type Manager struct {
	cfg     Config
	rt      internalapi.RuntimeService
	clock   clock.Clock
	backoff *flowcontrol.Backoff
	gate    *startGate

	// statusCache holds ContainerStatus answers keyed by container ID; an
	// entry is valid while ListContainers reports the same state, so a
	// resync asks the runtime only about containers that changed.
	mu          sync.Mutex
	statusCache map[string]*kubecontainer.ContainerStatus
	// backoffReported holds the exited containers whose back-off was
	// already announced with a BackOff event: one event per crash.
	backoffReported map[string]bool
	// boxCache holds PodSandboxStatus answers keyed by sandbox ID; an
	// entry is valid while ListPodSandbox reports the same state (a
	// sandbox's status, its IPs included, does not change while its state
	// does not).
	boxCache map[string]*runtimeapi.PodSandboxStatus
	// inRuntime: the pods the runtime had a sandbox or container of at
	// the last relist (GetPods), or that this process is creating a
	// sandbox for (inFlight) or finished creating one for since that
	// relist began (created: when its RunPodSandbox returned). relisted:
	// a relist succeeded once. A pod in none has nothing in the runtime
	// (see GetPodStatus).
	inRuntime map[types.UID]bool
	inFlight  map[types.UID]int
	created   map[types.UID]time.Time
	relisted  bool
	// listed is what the last relist found of each pod, listedAt when that
	// relist began (see GetPodStatusNewerThan). The relist's own objects,
	// never changed once stored.
	listed   map[types.UID]*kubecontainer.RunningPod
	listedAt time.Time
	// features are the runtime's handlers' and its own (CRI Status).
	features *RuntimeFeatures
	// actuated are the resources each container was last given (the
	// actuated_pods_state checkpoint in RootDir).
	actuated *Actuated
}

// Features is what the runtime says it can do (its handlers' recursive
// read-only mounts and user namespaces, supplementalGroupsPolicy).
func (m *Manager) Features() *RuntimeFeatures { return m.features }

// New returns a Manager for cfg. It fails when cfg has no Runtime or
// Images.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Runtime == nil:
		return nil, errors.New("kuberuntime: Config.Runtime is required")
	case cfg.Images == nil:
		return nil, errors.New("kuberuntime: Config.Images is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.RuntimeRequestTimeout == 0 {
		cfg.RuntimeRequestTimeout = 2 * time.Minute
	}
	if cfg.MaxParallelStarts == 0 {
		cfg.MaxParallelStarts = defaultParallelStarts()
	}
	actuated, err := state.Open(cfg.RootDir, state.ActuatedFile)
	if err != nil {
		return nil, err
	}
	return &Manager{
		actuated:    actuated,
		gate:        newStartGate(cfg.MaxParallelStarts),
		cfg:         cfg,
		rt:          cfg.Runtime,
		clock:       cfg.Clock,
		backoff:     crashLoopBackOff(cfg.CrashLoopBackOffMax, cfg.Clock),
		statusCache: map[string]*kubecontainer.ContainerStatus{},
		boxCache:    map[string]*runtimeapi.PodSandboxStatus{},
		inRuntime:   map[types.UID]bool{},
		inFlight:    map[types.UID]int{},
		created:     map[types.UID]time.Time{},

		backoffReported: map[string]bool{},
		features:        newRuntimeFeatures(cfg.Runtime, cfg.Clock),
	}, nil
}

// Runtime returns the CRI runtime service.
func (m *Manager) Runtime() internalapi.RuntimeService { return m.rt }

// GetPods lists every pod the runtime has, by the io.kubernetes.pod.uid label
// of its sandboxes and containers. Two CRI calls.
func (m *Manager) GetPods(ctx context.Context) ([]*kubecontainer.RunningPod, error) {
	start := m.clock.Now()
	sandboxes, err := m.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	pods := map[types.UID]*kubecontainer.RunningPod{}
	get := func(labels map[string]string) *kubecontainer.RunningPod {
		uid := types.UID(labels[PodUIDLabel])
		if uid == "" {
			return nil
		}
		p := pods[uid]
		if p == nil {
			p = &kubecontainer.RunningPod{UID: uid, Name: labels[PodNameLabel], Namespace: labels[PodNamespaceLabel], GracePeriod: -1}
			pods[uid] = p
		}
		return p
	}
	for _, s := range sandboxes {
		if p := get(s.Labels); p != nil {
			p.Sandboxes = append(p.Sandboxes, s)
		}
	}
	for _, c := range containers {
		if p := get(c.Labels); p != nil {
			p.Containers = append(p.Containers, c)
			if g, err := strconv.ParseInt(c.Annotations[podTerminationGraceAnnotation], 10, 64); err == nil && g > p.GracePeriod {
				p.GracePeriod = g
			}
		}
	}
	out := make([]*kubecontainer.RunningPod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	m.pruneStatusCache(sandboxes, containers)
	m.relistedPods(pods, start)
	return out, nil
}

// relistedPods records which pods the relist that began at start found in
// the runtime. Pods whose sandbox this process is creating, or finished
// creating after the relist began, stay known: the runtime lists a sandbox
// only once its RunPodSandbox returned.
func (m *Manager) relistedPods(pods map[types.UID]*kubecontainer.RunningPod, start time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inRuntime = make(map[types.UID]bool, len(pods)+len(m.inFlight)+len(m.created))
	for uid := range pods {
		m.inRuntime[uid] = true
	}
	for uid := range m.inFlight {
		m.inRuntime[uid] = true
	}
	for uid, at := range m.created {
		if at.Before(start) {
			delete(m.created, uid)
			continue
		}
		m.inRuntime[uid] = true
	}
	m.relisted = true
	m.listed, m.listedAt = pods, start
}

// creatingSandbox records that this process calls RunPodSandbox for the
// pod with uid; the returned func records its return.
func (m *Manager) creatingSandbox(uid types.UID) (done func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight[uid]++
	m.inRuntime[uid] = true
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.inFlight[uid]--; m.inFlight[uid] <= 0 {
			delete(m.inFlight, uid)
		}
		m.created[uid] = m.clock.Now()
		m.inRuntime[uid] = true
	}
}

// knownEmpty tells whether the runtime has nothing of the pod with uid: a
// relist succeeded, did not find it, and this process is not creating and
// has not created a sandbox for it since that relist began. Only this
// process creates sandboxes with its pods' UIDs, and whatever an earlier
// one left is in every relist.
func (m *Manager) knownEmpty(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.relisted && !m.inRuntime[uid]
}

// GetPodStatus reads what the runtime has for the pod with uid.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubecontainer.PodStatus, error) {
	status := &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: namespace}
	if m.knownEmpty(uid) {
		// A new pod: nothing to ask the runtime about.
		return status, nil
	}
	sandboxes, err := m.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{PodUIDLabel: string(uid)}})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	containers, err := m.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{PodUIDLabel: string(uid)}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return m.statusOf(ctx, status, sandboxes, containers)
}

// GetPodStatusNewerThan is the pod's status as GetPodStatus reads it, from
// the last relist's lists when that relist began after t, so that it shows
// everything done to the pod before t; otherwise from the runtime. A pod
// worker passes the end of the pod's previous sync, as upstream's workers
// read its PLEG cache (GetNewerThan): a periodic resync of a running pod
// then asks the runtime nothing, where it listed the pod's sandboxes and
// containers (two filtered lists, every pod every minute).
func (m *Manager) GetPodStatusNewerThan(ctx context.Context, uid types.UID, name, namespace string, t time.Time) (*kubecontainer.PodStatus, error) {
	m.mu.Lock()
	rp, fresh := m.listed[uid], m.relisted && m.listedAt.After(t)
	m.mu.Unlock()
	if !fresh {
		return m.GetPodStatus(ctx, uid, name, namespace)
	}
	status := &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: namespace}
	if rp == nil {
		// Nothing in the runtime when the relist began, and nothing done
		// to the pod since t.
		return status, nil
	}
	return m.statusOf(ctx, status, rp.Sandboxes, rp.Containers)
}

// statusOf fills status with the listed sandboxes and containers of its
// pod, asking the runtime the status of those whose state changed since
// its last answer.
func (m *Manager) statusOf(ctx context.Context, status *kubecontainer.PodStatus, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) (*kubecontainer.PodStatus, error) {
	for _, s := range sandboxes {
		st, err := m.sandboxStatus(ctx, s)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, err
		}
		status.Sandboxes = append(status.Sandboxes, st)
	}
	sortSandboxes(status.Sandboxes)
	if status.SandboxReady() {
		status.IPs = sandboxIPs(status.Sandboxes[0])
	}
	for _, c := range containers {
		cs, err := m.containerStatus(ctx, c)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, err
		}
		status.Containers = append(status.Containers, cs)
	}
	sortContainers(status.Containers)
	return status, nil
}

// sandboxStatus is the runtime's status of the listed sandbox s, asked only
// when its state changed since the last answer.
func (m *Manager) sandboxStatus(ctx context.Context, s *runtimeapi.PodSandbox) (*runtimeapi.PodSandboxStatus, error) {
	m.mu.Lock()
	cached := m.boxCache[s.Id]
	m.mu.Unlock()
	if cached != nil && cached.State == s.State {
		return cached, nil
	}
	resp, err := m.rt.PodSandboxStatus(ctx, s.Id, false)
	if err != nil {
		return nil, fmt.Errorf("pod sandbox status %s: %w", s.Id, err)
	}
	if resp.GetStatus() == nil {
		return nil, fmt.Errorf("pod sandbox status %s: empty answer", s.Id)
	}
	m.keepSandboxStatus(resp.Status)
	return resp.Status, nil
}

// keepSandboxStatus caches a sandbox's status (see boxCache).
func (m *Manager) keepSandboxStatus(st *runtimeapi.PodSandboxStatus) {
	m.mu.Lock()
	m.boxCache[st.Id] = st
	m.mu.Unlock()
}

// containerUser is the CRI status's user as the API's container status
// reports it, as upstream's toKubeContainerUser.
func containerUser(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}

func (m *Manager) containerStatus(ctx context.Context, c *runtimeapi.Container) (*kubecontainer.ContainerStatus, error) {
	m.mu.Lock()
	cached := m.statusCache[c.Id]
	m.mu.Unlock()
	if cached != nil && cached.State == c.State {
		return cached, nil
	}
	resp, err := m.rt.ContainerStatus(ctx, c.Id, false)
	if err != nil {
		return nil, fmt.Errorf("container status %s: %w", c.Id, err)
	}
	s := resp.GetStatus()
	if s == nil {
		return nil, fmt.Errorf("container status %s: empty answer", c.Id)
	}
	cs := &kubecontainer.ContainerStatus{
		ID:                       s.Id,
		Name:                     s.GetMetadata().GetName(),
		SandboxID:                c.PodSandboxId,
		State:                    s.State,
		CreatedAt:                unixNano(s.CreatedAt),
		StartedAt:                unixNano(s.StartedAt),
		FinishedAt:               unixNano(s.FinishedAt),
		ExitCode:                 s.ExitCode,
		Reason:                   s.Reason,
		Message:                  s.Message,
		Image:                    s.GetImage().GetImage(),
		ImageRef:                 s.ImageRef,
		Attempt:                  s.GetMetadata().GetAttempt(),
		Hash:                     s.Annotations[containerHashAnnotation],
		LogPath:                  s.LogPath,
		TerminationMessagePolicy: s.Annotations[containerTerminationPolicyAnnotation],
		User:                     containerUser(s.GetUser()),
	}
	cs.Resources = m.withActuated(c, containerResources(s.GetResources()))
	if m.cfg.ContainerStopSignals && s.StopSignal != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		// As upstream: RUNTIME_DEFAULT is a runtime that does not say.
		sig := signalName(s.StopSignal)
		cs.StopSignal = &sig
	}
	if n, err := strconv.Atoi(s.Annotations[containerRestartCountAnnotation]); err == nil {
		cs.RestartCount = n
	} else {
		cs.RestartCount = int(cs.Attempt)
	}
	if p := s.Annotations[containerTerminationPathAnnotation]; p != "" {
		for _, mnt := range s.Mounts {
			if mnt.ContainerPath == p {
				cs.TerminationMessageHostPath = mnt.HostPath
			}
		}
	}
	if cs.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		// Read once: an exited container's status is kept below.
		cs.Message = terminationMessage(cs)
	}
	// Only a container that can no longer change is worth keeping.
	if cs.State == runtimeapi.ContainerState_CONTAINER_EXITED || cs.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		m.mu.Lock()
		m.statusCache[c.Id] = cs
		m.mu.Unlock()
	}
	return cs, nil
}

// pruneStatusCache drops entries of sandboxes and containers the runtime no
// longer lists.
func (m *Manager) pruneStatusCache(boxes []*runtimeapi.PodSandbox, all []*runtimeapi.Container) {
	live := make(map[string]bool, len(boxes)+len(all))
	for _, s := range boxes {
		live[s.Id] = true
	}
	for _, c := range all {
		live[c.Id] = true
	}
	m.mu.Lock()
	maps.DeleteFunc(m.boxCache, func(id string, _ *runtimeapi.PodSandboxStatus) bool { return !live[id] })
	maps.DeleteFunc(m.statusCache, func(id string, _ *kubecontainer.ContainerStatus) bool { return !live[id] })
	maps.DeleteFunc(m.backoffReported, func(id string, _ bool) bool { return !live[id] })
	m.mu.Unlock()
}

// forgetStatus drops a container's cached status (its resources changed).
func (m *Manager) forgetStatus(id string) {
	m.mu.Lock()
	delete(m.statusCache, id)
	m.mu.Unlock()
}

// withActuated fills what the runtime does not report of a container's
// resources from those actuated, as upstream: the memory request always
// (no runtime has it), everything when the runtime reports nothing.
func (m *Manager) withActuated(c *runtimeapi.Container, r *kubecontainer.ContainerResources) *kubecontainer.ContainerResources {
	was, ok := m.actuated.Container(types.UID(c.GetLabels()[PodUIDLabel]), c.GetMetadata().GetName())
	if !ok {
		return r
	}
	if r == nil {
		return &kubecontainer.ContainerResources{
			CPURequest: nonZero(was.Requests, v1.ResourceCPU), CPULimit: nonZero(was.Limits, v1.ResourceCPU),
			MemoryRequest: nonZero(was.Requests, v1.ResourceMemory), MemoryLimit: nonZero(was.Limits, v1.ResourceMemory),
		}
	}
	r.MemoryRequest = nonZero(was.Requests, v1.ResourceMemory)
	return r
}

func nonZero(l v1.ResourceList, name v1.ResourceName) *resource.Quantity {
	if q, ok := l[name]; ok && !q.IsZero() {
		return &q
	}
	return nil
}

func (m *Manager) forgetContainer(id string) {
	m.mu.Lock()
	delete(m.statusCache, id)
	delete(m.backoffReported, id)
	m.mu.Unlock()
}

// firstBackoffReport reports whether the back-off after the exit of the
// container with id is announced for the first time.
func (m *Manager) firstBackoffReport(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backoffReported[id] {
		return false
	}
	m.backoffReported[id] = true
	return true
}

func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	n := s.GetNetwork()
	if n == nil || n.Ip == "" {
		return nil
	}
	ips := []string{n.Ip}
	for _, ip := range n.AdditionalIps {
		if ip.Ip != "" {
			ips = append(ips, ip.Ip)
		}
	}
	return ips
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// PodLogDir is the directory of a pod's container logs, as upstream:
// <podLogsDir>/<namespace>_<name>_<uid>.
func PodLogDir(podLogsDir, namespace, name string, uid types.UID) string {
	return filepath.Join(podLogsDir, namespace+"_"+name+"_"+string(uid))
}

// ParsePodLogDir is the namespace, name and UID of a pod's log directory
// name (PodLogDir's last element); ok is false for a name that is not one.
func ParsePodLogDir(dir string) (namespace, name string, uid types.UID, ok bool) {
	parts := strings.Split(dir, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], types.UID(parts[2]), true
}

// RemoveOrphanLogDirs removes the log directories in podLogsDir of pods
// keep does not keep, and returns their UIDs.
func RemoveOrphanLogDirs(podLogsDir string, keep func(types.UID) bool) ([]types.UID, error) {
	entries, err := os.ReadDir(podLogsDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var removed []types.UID
	var errs []error
	for _, e := range entries {
		_, _, uid, ok := ParsePodLogDir(e.Name())
		if !e.IsDir() || !ok || keep(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(podLogsDir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// containerResources are the resources the runtime reports a container
// has, as upstream's toKubeContainerResources: the CPU limit from the CFS
// quota, the CPU request from cpu.shares, the memory limit; nil when it
// reports none of them.
func containerResources(r *runtimeapi.ContainerResources) *kubecontainer.ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	var out kubecontainer.ContainerResources
	if l.CpuPeriod > 0 {
		if milli := cgroups.QuotaToMilliCPU(l.CpuQuota, l.CpuPeriod); milli > 0 {
			out.CPULimit = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if l.CpuShares > 0 {
		if milli := cgroups.SharesToMilliCPU(l.CpuShares); milli > 0 {
			out.CPURequest = resource.NewMilliQuantity(milli, resource.DecimalSI)
		}
	}
	if l.MemoryLimitInBytes > 0 {
		out.MemoryLimit = resource.NewQuantity(l.MemoryLimitInBytes, resource.BinarySI)
	}
	if out.CPULimit == nil && out.CPURequest == nil && out.MemoryLimit == nil {
		return nil
	}
	return &out
}
