package devicemanager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/bitmask"
	"github.com/nodelet/nodelet/internal/topologymanager"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	// Dir is the device plugins folder under the root dir.
	Dir = "device-plugins"
	// Socket is the Registration service's socket in Dir.
	Socket = "kubelet.sock"
	// StopGracePeriod is how long the resource of a plugin that went away
	// stays on the node (all its devices unhealthy) before it is removed,
	// as upstream's endpointStopGracePeriod.
	StopGracePeriod = 5 * time.Minute
	// rpcTimeout bounds a plugin's Allocate and GetPreferredAllocation
	// (they run at admission) and the connection to a registering plugin.
	rpcTimeout = 10 * time.Second
	// preStartTimeout bounds PreStartContainer, as upstream's.
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
)

// Config configures a Manager.
type Config struct {
	// Dir is <root-dir>/device-plugins. Required.
	Dir string
	// ActivePods are the pods whose devices are in use (admitted and not
	// finished, and those waiting for admission). Required.
	ActivePods func() []*v1.Pod
	// SourcesReady says every pod source has been seen once: until then
	// the devices of pods not yet seen are kept. Nil: always ready.
	SourcesReady func() bool
	// OnChange is called when the node's extended resources changed.
	OnChange func()
	// PodsChanged, when set, is told of the pods with devices of a
	// resource whose devices' health or set changed (their
	// allocatedResourcesStatus is recomputed by their next sync).
	PodsChanged func(uids []types.UID)
	// NUMANodes are the machine's NUMA nodes (the hints of devices that
	// report none; [0] when nil).
	NUMANodes []int
	// Registerer gets the device plugin metrics; nil registers none.
	Registerer prometheus.Registerer
	Clock      clock.Clock
}

// entry is one container's devices of one resource and the plugin's answer.
type entry struct {
	IDs  []string
	Resp *pluginapi.ContainerAllocateResponse
}

// allocations are pod UID -> container -> resource -> entry.
type allocations map[string]map[string]map[string]*entry

func (a allocations) get(uid, c, r string) *entry { return a[uid][c][r] }

func (a allocations) set(uid, c, r string, e *entry) {
	if a[uid] == nil {
		a[uid] = map[string]map[string]*entry{}
	}
	if a[uid][c] == nil {
		a[uid][c] = map[string]*entry{}
	}
	a[uid][c][r] = e
}

// inUse are the devices of resource r assigned to any container.
func (a allocations) inUse(r string) map[string]bool {
	out := map[string]bool{}
	for _, cs := range a {
		for _, rs := range cs {
			for _, id := range rs[r].idsOrNil() {
				out[id] = true
			}
		}
	}
	return out
}

func (e *entry) idsOrNil() []string {
	if e == nil {
		return nil
	}
	return e.IDs
}

// resourceState is what a resource's plugin reported.
type resourceState struct {
	plugin  *plugin // nil once it went away
	devices map[string]*pluginapi.Device
	// stoppedAt is when the plugin went away (zero while connected).
	stoppedAt time.Time
}

func (r *resourceState) healthy() []string {
	var out []string
	for id, d := range r.devices {
		if r.plugin != nil && d.Health == pluginapi.Healthy {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Manager runs the device plugins.
type Manager struct {
	cfg     Config
	clock   clock.Clock
	metrics *metrics

	mu        sync.Mutex
	resources map[string]*resourceState
	alloc     allocations
	// reuse are the devices of the pod being admitted that its containers
	// after its init containers may take, by resource (upstream's
	// devicesToReuse).
	reuse map[string]map[string][]string
}

// New returns a Manager for cfg; it fails when Dir or ActivePods is missing.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("devicemanager: Config.Dir is required")
	case cfg.ActivePods == nil:
		return nil, errors.New("devicemanager: Config.ActivePods is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SourcesReady == nil {
		cfg.SourcesReady = func() bool { return true }
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if len(cfg.NUMANodes) == 0 {
		cfg.NUMANodes = []int{0}
	}
	return &Manager{cfg: cfg, clock: cfg.Clock, metrics: newMetrics(cfg.Registerer),
		resources: map[string]*resourceState{}, alloc: allocations{}, reuse: map[string]map[string][]string{}}, nil
}

// Restore reads the checkpoint and clears the folder of the sockets a
// previous run left (plugins register again when kubelet.sock is new).
// It is called before pods are admitted; Run may come later.
func (m *Manager) Restore(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		return err
	}
	ents, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == CheckpointFile || e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(m.cfg.Dir, e.Name())); err != nil {
			logger.Error(err, "Cannot remove a stale file of the device plugins folder", "path", e.Name())
		}
	}
	a, registered, err := readCheckpoint(m.checkpointPath())
	if err != nil {
		// As upstream: go on without; the pods running keep their devices
		// but new pods may be given the same ones.
		logger.Error(err, "Device assignments not restored")
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.alloc = a
	now := m.clock.Now()
	for r := range registered {
		// Known, not connected: reported with no devices until its plugin
		// registers again, removed after the grace period otherwise.
		m.resources[r] = &resourceState{devices: map[string]*pluginapi.Device{}, stoppedAt: now}
	}
	if len(a) > 0 || len(registered) > 0 {
		logger.Info("Device assignments restored", "pods", len(a), "resources", slices.Sorted(maps.Keys(registered)))
	}
	return nil
}

func (m *Manager) checkpointPath() string { return filepath.Join(m.cfg.Dir, CheckpointFile) }

// Run serves the Registration service until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	path := filepath.Join(m.cfg.Dir, Socket)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, &registration{m: m, ctx: ctx})
	go func() {
		<-ctx.Done()
		s.Stop()
		m.mu.Lock()
		for _, r := range m.resources {
			if r.plugin != nil {
				r.plugin.close()
			}
		}
		m.mu.Unlock()
	}()
	logger.Info("Serving device plugin registration", "path", path)
	if err := s.Serve(l); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
	// ctx is Run's: the plugin's watch lives as long as the manager.
	ctx context.Context
}

// Register connects to the plugin and starts following its devices.
func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	logger := klog.FromContext(r.ctx).WithValues("resource", req.ResourceName)
	logger.Info("Device plugin registering", "endpoint", req.Endpoint, "version", req.Version)
	r.m.metrics.registrations.WithLabelValues(req.ResourceName).Inc()
	if err := validate(req); err != nil {
		logger.Error(err, "Device plugin registration refused")
		return &pluginapi.Empty{}, err
	}
	p, err := connect(r.ctx, req.ResourceName, filepath.Join(r.m.cfg.Dir, req.Endpoint))
	if err != nil {
		logger.Error(err, "Cannot connect to the device plugin")
		return &pluginapi.Empty{}, err
	}
	r.m.mu.Lock()
	st := r.m.resources[req.ResourceName]
	if st == nil {
		st = &resourceState{devices: map[string]*pluginapi.Device{}}
		r.m.resources[req.ResourceName] = st
	}
	if st.plugin != nil {
		st.plugin.close()
	}
	st.plugin, st.stoppedAt = p, time.Time{}
	r.m.mu.Unlock()
	go r.m.watch(r.ctx, req.ResourceName, p)
	return &pluginapi.Empty{}, nil
}

func validate(req *pluginapi.RegisterRequest) error {
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		return fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
	}
	if !IsExtendedResourceName(req.ResourceName) {
		return fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
	}
	if req.Endpoint == "" || filepath.Base(req.Endpoint) != req.Endpoint {
		return fmt.Errorf("the endpoint %q is not a socket name in the device plugins folder", req.Endpoint)
	}
	return nil
}

// IsExtendedResourceName says name is an extended resource: outside the
// kubernetes.io domain, with a prefix, and valid as a quota name.
func IsExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}

// watch follows the plugin's devices until its stream ends.
func (m *Manager) watch(ctx context.Context, resourceName string, p *plugin) {
	logger := klog.FromContext(ctx).WithValues("resource", resourceName)
	err := p.listAndWatch(ctx, func(devs []*pluginapi.Device) {
		m.mu.Lock()
		st := m.resources[resourceName]
		if st == nil || st.plugin != p {
			m.mu.Unlock()
			return
		}
		old := st.devices
		st.devices = map[string]*pluginapi.Device{}
		healthy := 0
		changed := len(old) != len(devs)
		for _, d := range devs {
			st.devices[d.ID] = d
			if d.Health == pluginapi.Healthy {
				healthy++
			}
			if o, ok := old[d.ID]; !ok || o.Health != d.Health {
				changed = true
			}
		}
		m.saveLocked(ctx)
		var users []types.UID
		notify := m.cfg.PodsChanged
		if changed && notify != nil {
			users = m.podsUsingLocked(resourceName)
		}
		m.mu.Unlock()
		logger.Info("Device plugin's devices", "devices", len(devs), "healthy", healthy)
		m.cfg.OnChange()
		if len(users) > 0 {
			notify(users)
		}
	})
	if ctx.Err() != nil {
		p.close()
		return // nodelet is stopping
	}
	m.mu.Lock()
	st := m.resources[resourceName]
	current := st != nil && st.plugin == p
	if current {
		st.plugin, st.stoppedAt = nil, m.clock.Now()
	}
	m.mu.Unlock()
	p.close()
	if current {
		logger.Info("Device plugin went away; its devices are unhealthy", "err", err)
		m.cfg.OnChange()
	}
}

// saveLocked writes the checkpoint; m.mu is held.
func (m *Manager) saveLocked(ctx context.Context) {
	registered := map[string][]string{}
	for name, r := range m.resources {
		registered[name] = slices.Sorted(maps.Keys(r.devices))
	}
	if err := writeCheckpoint(m.checkpointPath(), m.alloc, registered); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot write the device checkpoint")
	}
}

// Resources are the node's device plugin resources: capacity counts every
// device, allocatable the healthy ones of connected plugins. A resource
// whose plugin has been gone StopGracePeriod is removed: it is reported
// once more as zero and then no longer.
func (m *Manager) Resources() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.clock.Now()
	for name, r := range m.resources {
		n := int64(len(r.devices))
		if r.plugin == nil && now.Sub(r.stoppedAt) >= StopGracePeriod {
			delete(m.resources, name)
			n = 0
		}
		a := int64(len(r.healthy()))
		if n == 0 {
			a = 0
		}
		capacity[v1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
		allocatable[v1.ResourceName(name)] = *resource.NewQuantity(a, resource.DecimalSI)
	}
	return capacity, allocatable
}

// AdmissionAllocatable is the allocatable pods are admitted against: for
// each resource, its healthy devices, or the devices assigned to pods if
// more (as upstream's sanitizing of the node's allocatable): after a
// restart the running pods are admitted again before their plugin is back.
func (m *Manager) AdmissionAllocatable() v1.ResourceList {
	_, alloc := m.Resources()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.resources {
		if n := int64(len(m.alloc.inUse(name))); n > alloc.Name(v1.ResourceName(name), resource.DecimalSI).Value() {
			alloc[v1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return alloc
}

// AllocatePod assigns devices to the pod's containers without a NUMA
// affinity (the topology manager's none policy); a failure leaves the pod
// no devices.
func (m *Manager) AllocatePod(ctx context.Context, pod *v1.Pod) error {
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if err := m.Allocate(ctx, pod, &c, topologymanager.TopologyHint{}); err != nil {
			m.Release(pod.UID)
			return err
		}
	}
	return nil
}

// Allocate assigns a container of a pod being admitted its devices of
// every device plugin resource it asks (upstream's allocateContainerResources):
// the devices of the pod's init containers before it first, then those on
// affinity's NUMA nodes, calling the plugin's GetPreferredAllocation and
// Allocate. A failure refuses the pod (UnexpectedAdmissionError); what the
// pod got is released by the admission chain's hook. A resize keeps the
// pod's devices (only CPU and memory are resized in place).
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, affinity topologymanager.TopologyHint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	rs := m.deviceResources(c)
	if len(rs) == 0 {
		return nil
	}
	m.pruneLocked(ctx, pod)
	for other := range m.reuse {
		if other != uid {
			delete(m.reuse, other)
		}
	}
	if m.reuse[uid] == nil {
		m.reuse[uid] = map[string][]string{}
	}
	reuse := m.reuse[uid]
	sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
	initOnly := !sidecar && slices.ContainsFunc(pod.Spec.InitContainers, func(ic v1.Container) bool { return ic.Name == c.Name })
	for _, r := range rs {
		q := c.Resources.Limits[v1.ResourceName(r)]
		needed := int(q.Value())
		if e := m.alloc.get(uid, c.Name, r); e != nil {
			if len(e.IDs) != needed {
				return fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, c.Name, r, len(e.IDs), needed)
			}
		} else {
			e, err := m.allocateLocked(ctx, uid, c.Name, r, needed, reuse[r], affinity)
			if err != nil {
				return err
			}
			m.alloc.set(uid, c.Name, r, e)
			m.saveLocked(ctx)
		}
		ids := m.alloc.get(uid, c.Name, r).IDs
		if initOnly {
			reuse[r] = union(reuse[r], ids)
		} else {
			reuse[r] = slices.DeleteFunc(reuse[r], func(id string) bool { return slices.Contains(ids, id) })
		}
	}
	return nil
}

// TopologyHints are the container's device hints by resource (upstream's
// GetTopologyHints): none for a resource whose devices have no NUMA
// node; else the node sets holding enough free devices (and the pod's
// reusable ones), as narrow as the devices allow preferred.
func (m *Manager) TopologyHints(ctx context.Context, pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	out := map[string][]topologymanager.TopologyHint{}
	for _, r := range m.deviceResources(c) {
		q := c.Resources.Limits[v1.ResourceName(r)]
		out[r] = m.hintsLocked(ctx, r, int(q.Value()), m.alloc.get(uid, c.Name, r).idsOrNil(), m.reuse[uid][r])
	}
	return out
}

// PodTopologyHints are the pod's device hints (the pod scope): for the
// devices its containers ask at once.
func (m *Manager) PodTopologyHints(ctx context.Context, pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	out := map[string][]topologymanager.TopologyHint{}
	for name, q := range limits {
		r := string(name)
		if _, ok := m.resources[r]; !ok || q.IsZero() {
			continue
		}
		var allocated []string
		for _, cs := range m.alloc[uid] {
			allocated = union(allocated, cs[r].idsOrNil())
		}
		out[r] = m.hintsLocked(ctx, r, int(q.Value()), allocated, nil)
	}
	return out
}

// hintsLocked: nil when r's devices have no NUMA node; the allocated
// devices' own hints when they match the request (an empty list when
// not); else the hints of the free and reusable devices.
func (m *Manager) hintsLocked(ctx context.Context, r string, request int, allocated, reusable []string) []topologymanager.TopologyHint {
	st := m.resources[r]
	if !hasTopology(st) {
		return nil
	}
	if len(allocated) > 0 {
		if len(allocated) != request {
			return []topologymanager.TopologyHint{}
		}
		return m.deviceHints(ctx, r, allocated, nil, request)
	}
	used := m.alloc.inUse(r)
	var available []string
	for _, id := range st.healthy() {
		if !used[id] {
			available = append(available, id)
		}
	}
	if len(union(available, reusable)) < request {
		return []topologymanager.TopologyHint{}
	}
	return m.deviceHints(ctx, r, available, reusable, request)
}

func hasTopology(st *resourceState) bool {
	if st == nil {
		return false
	}
	for _, d := range st.devices {
		if d.Topology != nil && len(d.Topology.Nodes) > 0 {
			return true
		}
	}
	return false
}

func deviceNodes(d *pluginapi.Device) bitmask.Mask {
	var mask bitmask.Mask
	if d == nil || d.Topology == nil {
		return 0
	}
	for _, n := range d.Topology.Nodes {
		if n.ID >= 0 && n.ID < 64 {
			mask |= 1 << uint(n.ID)
		}
	}
	return mask
}

// deviceHints is upstream's generateDeviceTopologyHints, over the NUMA
// nodes the devices are on (those the machine has).
func (m *Manager) deviceHints(ctx context.Context, r string, available, reusable []string, request int) []topologymanager.TopologyHint {
	st := m.resources[r]
	var onDevices bitmask.Mask
	for _, d := range st.devices {
		onDevices |= deviceNodes(d)
	}
	var nodes []int
	for _, n := range m.cfg.NUMANodes {
		if onDevices.IsSet(n) {
			nodes = append(nodes, n)
		}
	}
	if unknown := onDevices &^ mustMask(m.cfg.NUMANodes); unknown != 0 {
		klog.FromContext(ctx).Info("Ignoring NUMA node IDs reported by device plugin that are unknown to the machine", "resource", r, "unknownNodes", unknown.Bits(), "knownNodes", m.cfg.NUMANodes)
	}
	if len(nodes) == 0 {
		nodes = m.cfg.NUMANodes
	}
	minSize := len(nodes)
	out := []topologymanager.TopologyHint{}
	bitmask.Iterate(nodes, func(mask bitmask.Mask) {
		inMask := 0
		for _, d := range st.devices {
			if deviceNodes(d)&mask != 0 {
				inMask++
			}
		}
		if inMask >= request && mask.Count() < minSize {
			minSize = mask.Count()
		}
		matching := 0
		for _, id := range reusable {
			d := st.devices[id]
			if d == nil || d.Topology == nil {
				continue
			}
			if deviceNodes(d)&mask == 0 {
				return
			}
			matching++
		}
		for _, id := range available {
			if deviceNodes(st.devices[id])&mask != 0 {
				matching++
			}
		}
		if matching >= request {
			out = append(out, topologymanager.TopologyHint{NUMANodeAffinity: mask})
		}
	})
	for i := range out {
		out[i].Preferred = out[i].NUMANodeAffinity.Count() == minSize
	}
	return out
}

func mustMask(ids []int) bitmask.Mask {
	m, _ := bitmask.New(ids...)
	return m
}

// Release forgets the devices of a pod that will not run (refused after
// its devices were assigned).
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.reuse, string(uid))
	if _, ok := m.alloc[string(uid)]; ok {
		delete(m.alloc, string(uid))
		m.saveLocked(context.Background())
	}
}

func (m *Manager) wantsDevices(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if len(m.deviceResources(&cs[i])) > 0 {
				return true
			}
		}
	}
	return false
}

// deviceResources are the container's limits served by device plugins (or
// remembered from one), sorted.
func (m *Manager) deviceResources(c *v1.Container) []string {
	var out []string
	for name, q := range c.Resources.Limits {
		if _, ok := m.resources[string(name)]; ok && !q.IsZero() {
			out = append(out, string(name))
		}
	}
	slices.Sort(out)
	return out
}

// pruneLocked forgets the devices of pods no longer active (once every
// source was seen, so a restart does not forget pods not yet listed).
func (m *Manager) pruneLocked(ctx context.Context, keep *v1.Pod) {
	if !m.cfg.SourcesReady() {
		return
	}
	active := map[string]bool{string(keep.UID): true}
	for _, p := range m.cfg.ActivePods() {
		active[string(p.UID)] = true
	}
	for uid := range m.alloc {
		if !active[uid] {
			klog.FromContext(ctx).V(2).Info("Devices released", "podUID", uid)
			delete(m.alloc, uid)
		}
	}
}

func (m *Manager) allocateLocked(ctx context.Context, uid, container, r string, needed int, reusable []string, affinity topologymanager.TopologyHint) (*entry, error) {
	st := m.resources[r]
	if st == nil {
		return nil, fmt.Errorf("cannot allocate unregistered device %s", r)
	}
	healthy := st.healthy()
	if len(healthy) == 0 {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", r)
	}
	used := m.alloc.inUse(r)
	var available []string
	for _, id := range healthy {
		if !used[id] {
			available = append(available, id)
		}
	}
	reusable = slices.DeleteFunc(slices.Clone(reusable), func(id string) bool { return !slices.Contains(healthy, id) })
	preferred := func(avail, must []string) []string {
		p := st.plugin
		if !p.options.GetGetPreferredAllocationAvailable() {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
		resp, err := p.client.GetPreferredAllocation(pctx, &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: avail, MustIncludeDeviceIDs: must, AllocationSize: int32(needed),
			}},
		})
		if err != nil {
			klog.FromContext(ctx).Error(err, "Device plugin's preferred allocation not had", "resource", r)
			return nil
		}
		if len(resp.ContainerResponses) == 0 {
			return nil
		}
		return resp.ContainerResponses[0].DeviceIDs
	}
	var aligned, unaligned, noAffinity []string
	if hasTopology(st) && affinity.NUMANodeAffinity != 0 {
		aligned, unaligned, noAffinity = byAffinity(st.devices, available, affinity.NUMANodeAffinity)
	} else {
		noAffinity = available
	}
	ids, ok := choose(reusable, aligned, unaligned, noAffinity, needed, preferred)
	if !ok {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", r, needed, len(available)+len(reusable))
	}
	p := st.plugin
	start := m.clock.Now()
	actx, cancel := context.WithTimeout(ctx, rpcTimeout)
	resp, err := p.client.Allocate(actx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	cancel()
	m.metrics.allocDuration.WithLabelValues(r).Observe(m.clock.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("device plugin %s failed to allocate %v: %w", r, ids, err)
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("device plugin %s answered %d container responses, not 1", r, len(resp.ContainerResponses))
	}
	klog.FromContext(ctx).Info("Devices allocated", "podUID", uid, "container", container, "resource", r, "devices", ids)
	return &entry{IDs: ids, Resp: resp.ContainerResponses[0]}, nil
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.SortedFunc(maps.Keys(m), cmp.Compare[string])
}

// connectOptions are the gRPC options of a plugin connection (a unix
// socket, no TLS).
func connectOptions(path string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}),
	}
}
