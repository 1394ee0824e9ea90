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
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/admission"
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
	return &Manager{cfg: cfg, clock: cfg.Clock, metrics: newMetrics(cfg.Registerer),
		resources: map[string]*resourceState{}, alloc: allocations{}}, nil
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
		st.devices = map[string]*pluginapi.Device{}
		healthy := 0
		for _, d := range devs {
			st.devices[d.ID] = d
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		m.saveLocked(ctx)
		m.mu.Unlock()
		logger.Info("Device plugin's devices", "devices", len(devs), "healthy", healthy)
		m.cfg.OnChange()
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

// Admit is the device plugins' admission handler (upstream's resource
// allocation handler): it assigns the pod its devices (Allocate), and
// refuses it UnexpectedAdmissionError when that fails. A resize keeps
// the pod's devices (only CPU and memory are resized in place).
func (m *Manager) Admit(ctx context.Context, a admission.Attributes) admission.Result {
	if a.Operation == admission.OperationResize {
		return admission.Result{Admit: true}
	}
	if err := m.Allocate(ctx, a.Pod); err != nil {
		return admission.Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to " + err.Error() + ", which is unexpected"}
	}
	return admission.Result{Admit: true}
}

// Allocate assigns devices to the pod's containers that ask for device
// plugin resources, calling each plugin's Allocate. A failure is an
// admission failure; the pod keeps no devices then.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	if !m.wantsDevices(pod) {
		return nil
	}
	m.pruneLocked(ctx, pod)
	reusable := map[string][]string{}
	var added [][3]string
	fail := func(err error) error {
		for _, k := range added {
			delete(m.alloc[k[0]][k[1]], k[2])
		}
		return err
	}
	each := func(c *v1.Container, initOnly bool) error {
		for _, r := range m.deviceResources(c) {
			q := c.Resources.Limits[v1.ResourceName(r)]
			needed := int(q.Value())
			if e := m.alloc.get(uid, c.Name, r); e != nil {
				if len(e.IDs) != needed {
					return fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, c.Name, r, len(e.IDs), needed)
				}
			} else {
				e, err := m.allocateLocked(ctx, uid, c.Name, r, needed, reusable[r])
				if err != nil {
					return err
				}
				m.alloc.set(uid, c.Name, r, e)
				added = append(added, [3]string{uid, c.Name, r})
			}
			ids := m.alloc.get(uid, c.Name, r).IDs
			if initOnly {
				reusable[r] = union(reusable[r], ids)
			} else {
				reusable[r] = slices.DeleteFunc(reusable[r], func(id string) bool { return slices.Contains(ids, id) })
			}
		}
		return nil
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		if err := each(c, !sidecar); err != nil {
			return fail(err)
		}
	}
	for i := range pod.Spec.Containers {
		if err := each(&pod.Spec.Containers[i], false); err != nil {
			return fail(err)
		}
	}
	m.saveLocked(ctx)
	return nil
}

// Release forgets the devices of a pod that will not run (refused after
// its devices were assigned).
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
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

func (m *Manager) allocateLocked(ctx context.Context, uid, container, r string, needed int, reusable []string) (*entry, error) {
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
	var preferred []string
	p := st.plugin
	if p.options.GetGetPreferredAllocationAvailable() && len(reusable) < needed {
		pctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		resp, err := p.client.GetPreferredAllocation(pctx, &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs:   union(reusable, available),
				MustIncludeDeviceIDs: reusable,
				AllocationSize:       int32(needed),
			}},
		})
		cancel()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Device plugin's preferred allocation not had", "resource", r)
		} else if len(resp.ContainerResponses) > 0 {
			preferred = resp.ContainerResponses[0].DeviceIDs
		}
	}
	ids, ok := choose(reusable, available, needed, preferred)
	if !ok {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", r, needed, len(available)+len(reusable))
	}
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
