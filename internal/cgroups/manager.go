package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Cgroup drivers (cgroupDriver).
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

const (
	// NodeAllocatableCgroup is the cgroup of all pods under cgroupRoot.
	NodeAllocatableCgroup = "kubepods"
	podCgroupPrefix       = "pod"
	// OrphanGrace: an empty pod cgroup younger than this is never taken for
	// an orphan. Another agent sharing the tree (a second nodelet on the
	// machine) may have just made it for a sandbox about to start.
	OrphanGrace = time.Minute
	// OrphanRescan is how often the orphan sweep reads the whole pod tree
	// when nothing says a pod's cgroups were left behind (RemovePod failed,
	// a pod this process configured went away without it, the last sweep
	// left some): what another agent sharing the tree may leave.
	OrphanRescan = time.Minute
	// resourcePID is the capacity and reservation name of process IDs.
	resourcePID v1.ResourceName = "pid"
)

// Config configures a Manager.
type Config struct {
	// Driver is cgroupDriver: "cgroupfs" (default) or "systemd".
	Driver string
	// CgroupRoot is the KubeletConfiguration's cgroupRoot: the cgroup
	// kubepods goes under, a path below the root of every hierarchy ("/" by
	// default). It must exist. Where the hierarchies are mounted is
	// Machine.Cgroups.Mount.
	CgroupRoot string
	// CgroupsPerQOS is cgroupsPerQOS: false creates no cgroup at all and
	// gives the runtime CgroupRoot as the pods' parent (its own default when
	// CgroupRoot is "/" or empty).
	CgroupsPerQOS bool
	// Machine is the machine's facts: the cgroup version and hierarchies
	// (at least one), the capacity (cpu, memory, hugepages-<size>, and pid
	// from pid_max) and the huge page sizes.
	Machine machine.Facts
	// KubeReserved, SystemReserved and EnforceNodeAllocatable: with "pods"
	// in EnforceNodeAllocatable, kubepods is limited to capacity minus the
	// reservations, else to capacity.
	KubeReserved           map[string]string
	SystemReserved         map[string]string
	EnforceNodeAllocatable []string
	// KubeReservedCgroup and SystemReservedCgroup are the existing cgroups
	// "kube-reserved" and "system-reserved" (or their "-compressible"
	// twins, cpu only) in EnforceNodeAllocatable limit to the reservations,
	// as the driver spells them.
	KubeReservedCgroup   string
	SystemReservedCgroup string
	// Event, when set, is told of node allocatable enforcement (a Normal
	// NodeAllocatableEnforced or a Warning FailedNodeAllocatableEnforcement
	// with upstream's messages), for the node's events.
	Event func(eventType, reason, message string)
	// DisableCPUCFSQuota is cpuCFSQuota: false.
	DisableCPUCFSQuota bool
	// CPUCFSQuotaPeriod is cpuCFSQuotaPeriod (100 ms when 0).
	CPUCFSQuotaPeriod time.Duration
	// PodPidsLimit is podPidsLimit: pids.max of each pod cgroup when > 0.
	PodPidsLimit int64
	// SwapBehavior is memorySwap.swapBehavior ("", NoSwap or LimitedSwap).
	SwapBehavior string
	// KubeletCgroups is kubeletCgroups: the cgroup (a cgroupfs path,
	// "/kubelet.slice", whatever the driver, as upstream's system
	// containers) this process moves itself into at start, made when
	// missing. Empty: it stays where it was started.
	KubeletCgroups string
	// Clock is the clock of the orphan grace (the real clock when nil).
	Clock clock.PassiveClock

	// mkdir and rmdir make and remove one cgroup directory; tests fake the
	// kernel with them.
	mkdir func(string) error
	rmdir func(string) error
	// newUnits is the systemd driver's units (systemd over D-Bus when
	// nil); tests fake systemd with it.
	newUnits func(*Manager) units
}

// Manager creates and removes the pod cgroup hierarchy.
type Manager struct {
	cfg Config
	// v2: the unified hierarchy, hierarchies is then its mount alone.
	v2          bool
	hierarchies []string
	// root is where pods go: cgroupRoot/kubepods with CgroupsPerQOS, else
	// cgroupRoot.
	root      CgroupName
	pageSizes []int64
	// units are the cgroups as systemd units with the systemd driver, nil
	// with cgroupfs (nodelet then writes the cgroup filesystem itself).
	units units

	mu sync.Mutex
	// ensured holds the pods whose cgroup was configured by this process.
	ensured map[types.UID]bool
	// burstable is the cpu request (milli-CPU) of each Burstable pod with a
	// cgroup: kubepods/burstable gets their sum as shares, as upstream.
	burstable       map[types.UID]int64
	burstableShares int64
	// sweepAt is when CleanupOrphans next reads the pod tree (zero: at its
	// next call).
	sweepAt time.Time
}

// New returns a Manager for cfg on the machine of cfg.Machine. It changes
// nothing.
func New(cfg Config) (*Manager, error) {
	if cfg.Driver == "" {
		cfg.Driver = DriverCgroupfs
	}
	if cfg.Driver != DriverCgroupfs && cfg.Driver != DriverSystemd {
		return nil, fmt.Errorf("cgroupDriver must be %s or %s, got %q", DriverCgroupfs, DriverSystemd, cfg.Driver)
	}
	cg := cfg.Machine.Cgroups
	if len(cg.Hierarchies) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy mounted under %s", cg.Mount)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.mkdir == nil {
		cfg.mkdir = func(dir string) error { return os.Mkdir(dir, 0o755) }
	}
	if cfg.rmdir == nil {
		cfg.rmdir = func(dir string) error { return os.Remove(dir) }
	}
	m := &Manager{cfg: cfg, v2: cg.V2, hierarchies: cg.Hierarchies, ensured: map[types.UID]bool{}, burstable: map[types.UID]int64{}}
	for _, hp := range cfg.Machine.HugePages {
		m.pageSizes = append(m.pageSizes, hp.PageSize)
	}
	m.root = m.parseName(cfg.CgroupRoot)
	if cfg.CgroupsPerQOS {
		m.root = NewCgroupName(m.root, NodeAllocatableCgroup)
	}
	if cfg.Driver == DriverSystemd {
		if cfg.newUnits != nil {
			m.units = cfg.newUnits(m)
		} else {
			m.units = &systemdUnits{v2: m.v2, pageSizes: m.pageSizes, hugetlb: m.hasController("hugetlb")}
		}
	}
	return m, nil
}

// CgroupV2 tells whether the unified hierarchy is in use.
func (m *Manager) CgroupV2() bool { return m.v2 }

// ResourceOptions are the facts containers' CRI resources depend on.
func (m *Manager) ResourceOptions() ResourceOptions {
	sizes := make([]string, 0, len(m.pageSizes))
	for _, s := range m.pageSizes {
		sizes = append(sizes, byteSizeUnit(s))
	}
	return ResourceOptions{
		MemoryCapacity:          m.cfg.Machine.MemoryCapacity,
		DisableCPUCFSQuota:      m.cfg.DisableCPUCFSQuota,
		CPUCFSQuotaPeriod:       m.cfg.CPUCFSQuotaPeriod,
		HugePageSizes:           sizes,
		CgroupV2:                m.v2,
		SwapBehavior:            m.cfg.SwapBehavior,
		SwapControllerAvailable: m.cfg.Machine.Swap.ControllerAvailable,
		SwapCapacity:            m.cfg.Machine.Swap.Capacity,
	}
}

// Start checks the controllers pods need and creates kubepods (limited to
// the node's allocatable), kubepods/burstable and kubepods/besteffort (no
// hugetlb limit, 2 shares for besteffort), as upstream's container manager
// does; an error means pods cannot get their cgroups. It then writes the
// reservations into kubeReservedCgroup and systemReservedCgroup as
// enforceNodeAllocatable asks (those must exist: an error otherwise, fatal
// upstream too). Without CgroupsPerQOS it does nothing. As upstream, a
// failure is fatal to the caller: pods would run without their limits.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.start(ctx); err != nil {
		return fmt.Errorf("failed to start the container manager (pod cgroups, cgroupDriver %s, cgroupRoot %q, cgroupsPerQOS %v): %w",
			m.cfg.Driver, m.cfg.CgroupRoot, m.cfg.CgroupsPerQOS, err)
	}
	version := "v1"
	if m.CgroupV2() {
		version = "v2"
	}
	klog.FromContext(ctx).Info("Pod cgroups ready", "cgroupVersion", version, "driver", m.cfg.Driver, "cgroupsPerQOS", m.cfg.CgroupsPerQOS,
		"podsCgroup", m.PodsCgroup())
	return nil
}

func (m *Manager) start(ctx context.Context) error {
	if err := m.enterKubeletCgroup(ctx); err != nil {
		return err
	}
	if !m.cfg.CgroupsPerQOS {
		return nil
	}
	if err := m.validate(); err != nil {
		return err
	}
	if len(m.root) > 1 {
		parent := m.root[:len(m.root)-1]
		for _, h := range m.hierarchies {
			if dir := m.dir(h, parent); !exists(dir) {
				return fmt.Errorf("cgroupRoot %q does not exist (%s)", m.cfg.CgroupRoot, dir)
			}
		}
	}
	nodeRC, err := m.nodeAllocatableConfig()
	if err != nil {
		return err
	}
	if err := m.create(m.root, nil); err != nil {
		return fmt.Errorf("create the node allocatable cgroup %s: %w", m.Name(m.root), err)
	}
	if err := m.apply(m.root, nodeRC); err != nil {
		// Upstream keeps retrying this in the background with an event;
		// pods can run meanwhile.
		klog.FromContext(ctx).Error(err, "Failed to enforce node allocatable limits on the pods' cgroup", "cgroup", m.Name(m.root))
		m.event(v1.EventTypeWarning, ReasonFailedNodeAllocatableEnforcement, fmt.Sprintf("Failed to update Node Allocatable Limits %q: %v", m.Name(m.root), err))
	} else {
		m.event(v1.EventTypeNormal, ReasonNodeAllocatableEnforced, "Updated Node Allocatable limit across pods")
	}
	for _, r := range m.reservations() {
		if err := m.enforceReserved(r); err != nil {
			msg := fmt.Sprintf("Failed to enforce %s Cgroup Limits on %q: %v", r.what, r.cgroup, err)
			m.event(v1.EventTypeWarning, ReasonFailedNodeAllocatableEnforcement, msg)
			return errors.New(msg)
		}
		klog.FromContext(ctx).Info("Enforced a reservation on its cgroup", "enforcement", r.key, "cgroup", r.cgroup, "reserved", r.reserved)
		m.event(v1.EventTypeNormal, ReasonNodeAllocatableEnforced, fmt.Sprintf("Updated limits on %s cgroup %v", strings.ToLower(strings.TrimSuffix(r.what, " Compressible")), r.cgroup))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, class := range []v1.PodQOSClass{v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		rc := &ResourceConfig{HugePageLimit: unboundedHugePages(m.pageSizes)}
		if class == v1.PodQOSBestEffort {
			shares := int64(MinShares)
			rc.CPUShares = &shares
		}
		name := m.qosName(class)
		if err := m.create(name, rc); err != nil {
			return fmt.Errorf("create the top level %s QOS cgroup %s: %w", class, m.Name(name), err)
		}
	}
	m.burstableShares = 0
	return m.updateBurstableLocked()
}

// enterKubeletCgroup moves this process (all its threads) into
// kubeletCgroups in every hierarchy, as upstream's container manager does.
func (m *Manager) enterKubeletCgroup(ctx context.Context) error {
	name := m.cfg.KubeletCgroups
	if name == "" {
		return nil
	}
	pid := strconv.Itoa(os.Getpid())
	for _, h := range m.hierarchies {
		dir := filepath.Join(h, filepath.FromSlash(strings.TrimPrefix(name, "/")))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("kubeletCgroups %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0); err != nil {
			return fmt.Errorf("kubeletCgroups %s: moving nodelet (pid %s) into %s: %w", name, pid, dir, err)
		}
	}
	klog.FromContext(ctx).Info("Moved into kubeletCgroups", "cgroup", name, "pid", pid)
	return nil
}

func (m *Manager) event(eventType, reason, message string) {
	if m.cfg.Event != nil {
		m.cfg.Event(eventType, reason, message)
	}
}

// validate checks that the controllers pods are limited with are there.
func (m *Manager) validate() error {
	var missing []string
	if m.v2 {
		have := map[string]bool{}
		data, _ := os.ReadFile(filepath.Join(m.cfg.Machine.Cgroups.Mount, "cgroup.controllers"))
		for _, c := range strings.Fields(string(data)) {
			have[c] = true
		}
		for _, c := range []string{"cpu", "cpuset", "memory"} {
			if !have[c] {
				missing = append(missing, c)
			}
		}
	} else {
		for c, file := range map[string]string{"cpu": "cpu.shares", "cpuacct": "cpuacct.usage", "cpuset": "cpuset.cpus", "memory": "memory.limit_in_bytes"} {
			if m.hierarchyWith(file) == "" {
				missing = append(missing, c)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("cgroup controllers not mounted under %s: %v", m.cfg.Machine.Cgroups.Mount, missing)
	}
	return nil
}

// hasController tells whether the controller is there: in the root's
// cgroup.controllers (v2), as a hierarchy of its own or co-mounted (v1).
func (m *Manager) hasController(c string) bool {
	if m.v2 {
		data, _ := os.ReadFile(filepath.Join(m.cfg.Machine.Cgroups.Mount, "cgroup.controllers"))
		return slices.Contains(strings.Fields(string(data)), c)
	}
	for _, h := range m.hierarchies {
		if slices.Contains(strings.Split(filepath.Base(h), ","), c) {
			return true
		}
	}
	return false
}

// hierarchyWith is the v1 hierarchy whose root has file.
func (m *Manager) hierarchyWith(file string) string {
	for _, h := range m.hierarchies {
		if exists(filepath.Join(h, file)) {
			return h
		}
	}
	return ""
}

// nodeAllocatableConfig is kubepods' configuration: capacity, minus the
// reservations when enforceNodeAllocatable has "pods".
func (m *Manager) nodeAllocatableConfig() (*ResourceConfig, error) {
	alloc := m.capacity()
	if slices.Contains(m.cfg.EnforceNodeAllocatable, "pods") {
		var err error
		if alloc, err = machine.Allocatable(alloc, m.cfg.KubeReserved, m.cfg.SystemReserved, nil); err != nil {
			return nil, err
		}
	}
	rc := &ResourceConfig{HugePageLimit: HugePageLimits(alloc)}
	if q, ok := alloc[v1.ResourceMemory]; ok {
		v := q.Value()
		rc.Memory = &v
	}
	if q, ok := alloc[v1.ResourceCPU]; ok {
		v := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &v
	}
	if q, ok := alloc[resourcePID]; ok {
		v := q.Value()
		rc.PidsLimit = &v
	}
	return rc, nil
}

// capacity is the capacity of the pods' cgroup, as upstream's
// internalCapacity: the machine's cpu, memory and hugepages-<size>, and pid
// (pid_max) when known.
func (m *Manager) capacity() v1.ResourceList {
	c := m.cfg.Machine.Capacity()
	if pids := m.cfg.Machine.PIDMax; pids > 0 {
		c[resourcePID] = *resource.NewQuantity(pids, resource.DecimalSI)
	}
	return c
}

// qosName is the cgroup of a QoS class: Guaranteed pods go directly under
// kubepods, as upstream.
func (m *Manager) qosName(class v1.PodQOSClass) CgroupName {
	switch class {
	case v1.PodQOSBurstable:
		return NewCgroupName(m.root, "burstable")
	case v1.PodQOSBestEffort:
		return NewCgroupName(m.root, "besteffort")
	default:
		return m.root
	}
}

// PodCgroupName is the pod's cgroup: pod<uid> under its QoS cgroup.
func (m *Manager) PodCgroupName(pod *v1.Pod) CgroupName {
	return NewCgroupName(m.qosName(podspec.QOSClass(pod)), podCgroupPrefix+string(pod.UID))
}

// PodsCgroup is where pods go, as the driver spells it: kubepods under
// cgroupRoot ("/kubepods" or "/kubepods.slice"), or cgroupRoot without
// CgroupsPerQOS.
func (m *Manager) PodsCgroup() string { return m.Name(m.root) }

// Name is a cgroup as the driver spells it, what CRI's CgroupParent takes:
// "/kubepods/burstable/pod<uid>" (cgroupfs) or
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice"
// (systemd; runtimes use its last element).
func (m *Manager) Name(n CgroupName) string {
	if m.cfg.Driver == DriverSystemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// dir is a cgroup's directory in hierarchy h.
func (m *Manager) dir(h string, n CgroupName) string {
	return filepath.Join(h, filepath.FromSlash(m.Name(n)))
}

// EnsurePod creates the pod's cgroup (and any missing parent) in every
// hierarchy, applies the pod-level limits of ResourceConfigForPod and
// returns the cgroup's name for the runtime. The work is done once per pod
// and process, again only when the cgroup went away. Without CgroupsPerQOS
// it returns cgroupRoot ("" when that is the root: the runtime's default).
func (m *Manager) EnsurePod(ctx context.Context, pod *v1.Pod) (string, error) {
	if !m.cfg.CgroupsPerQOS {
		if len(m.root) == 0 {
			return "", nil
		}
		return m.Name(m.root), nil
	}
	name := m.PodCgroupName(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ensured[pod.UID] && m.existsAll(name) {
		return m.Name(name), nil
	}
	rc := m.PodConfig(pod)
	m.trackBurstableLocked(ctx, pod)
	if err := m.create(name, rc); err != nil {
		return "", err
	}
	m.ensured[pod.UID] = true
	return m.Name(name), nil
}

// PodConfig is the pod-level cgroup configuration of pod (its allocated
// resources): ResourceConfigForPod with the node's CFS settings and
// podPidsLimit.
func (m *Manager) PodConfig(pod *v1.Pod) *ResourceConfig {
	period := int64(QuotaPeriod)
	if m.cfg.CPUCFSQuotaPeriod > 0 {
		period = int64(m.cfg.CPUCFSQuotaPeriod / time.Microsecond)
	}
	rc := ResourceConfigForPod(pod, !m.cfg.DisableCPUCFSQuota, period)
	if m.cfg.PodPidsLimit > 0 {
		v := m.cfg.PodPidsLimit
		rc.PidsLimit = &v
	}
	return rc
}

// trackBurstableLocked counts a Burstable pod's CPU request in the
// Burstable QoS cgroup's shares; mu held.
func (m *Manager) trackBurstableLocked(ctx context.Context, pod *v1.Pod) {
	if podspec.QOSClass(pod) != v1.PodQOSBurstable {
		return
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	m.burstable[pod.UID] = req.Cpu().MilliValue()
	if err := m.updateBurstableLocked(); err != nil {
		klog.FromContext(ctx).Error(err, "Failed to update the burstable QoS cgroup")
	}
}

// updateBurstableLocked gives kubepods/burstable the shares of its pods' cpu
// requests (2 when none), written when it changes.
func (m *Manager) updateBurstableLocked() error {
	var sum int64
	for _, v := range m.burstable {
		sum += v
	}
	shares := MilliCPUToShares(sum)
	if shares == m.burstableShares {
		return nil
	}
	if err := m.apply(m.qosName(v1.PodQOSBurstable), &ResourceConfig{CPUShares: &shares}); err != nil {
		return err
	}
	m.burstableShares = shares
	return nil
}

// create makes the cgroup n with rc's limits: with the systemd driver a
// unit systemd makes (units), else the directories nodelet makes (createFS).
func (m *Manager) create(n CgroupName, rc *ResourceConfig) error {
	if m.units != nil {
		return m.units.Create(m.Name(n), rc)
	}
	return m.createFS(m.Name(n), rc)
}

// createFS makes the cgroup p (as the driver spells it) and its missing
// parents in every hierarchy (cgroup v1: cpuset cpus and mems copied from
// the parent; v2: the controllers enabled in each parent's
// subtree_control), then writes rc.
func (m *Manager) createFS(p string, rc *ResourceConfig) error {
	rel := strings.Split(strings.Trim(p, "/"), "/")
	for _, h := range m.hierarchies {
		dir := h
		for _, part := range rel {
			if part == "" {
				continue
			}
			parent := dir
			dir = filepath.Join(dir, part)
			if exists(dir) {
				continue
			}
			if m.v2 {
				enableControllers(parent)
			}
			if err := m.cfg.mkdir(dir); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			if !m.v2 {
				if err := copyCpuset(parent, dir); err != nil {
					return err
				}
			}
		}
	}
	if rc == nil {
		return nil
	}
	return m.applyFS(p, rc)
}

// v2Controllers are the controllers enabled for pods on cgroup v2.
var v2Controllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}

// enableControllers enables in dir's subtree_control the controllers
// nodelet limits with, among those dir has.
func enableControllers(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	enabled, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	have := strings.Fields(string(data))
	on := strings.Fields(string(enabled))
	var add []string
	for _, c := range v2Controllers {
		if slices.Contains(have, c) && !slices.Contains(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return
	}
	file := filepath.Join(dir, "cgroup.subtree_control")
	if os.WriteFile(file, []byte(strings.Join(add, " ")), 0) == nil {
		return
	}
	// One at a time: one the kernel refuses does not stop the others.
	for _, c := range add {
		_ = os.WriteFile(file, []byte(c), 0)
	}
}

// copyCpuset gives a new v1 cpuset cgroup its parent's cpus and mems: a
// cpuset cgroup without them cannot hold a process.
func copyCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || strings.TrimSpace(string(cur)) != "" {
			continue
		}
		v, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), v, 0); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
		}
	}
	return nil
}

// apply gives the cgroup n rc's limits: its unit's properties with the
// systemd driver (units), else its files (applyFS).
func (m *Manager) apply(n CgroupName, rc *ResourceConfig) error {
	if m.units != nil {
		return m.units.Set(m.Name(n), rc)
	}
	return m.applyFS(m.Name(n), rc)
}

// applyFS writes rc into the cgroup p of every hierarchy that has the files.
func (m *Manager) applyFS(p string, rc *ResourceConfig) error {
	var errs []error
	for _, h := range m.hierarchies {
		dir := filepath.Join(h, filepath.FromSlash(p))
		if m.v2 {
			errs = append(errs, m.applyV2(dir, rc))
		} else {
			errs = append(errs, m.applyV1(dir, rc))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) applyV1(dir string, rc *ResourceConfig) error {
	var errs []error
	w := func(file string, v int64) {
		errs = append(errs, writeIfExists(dir, file, strconv.FormatInt(v, 10)))
	}
	if rc.CPUShares != nil {
		w("cpu.shares", *rc.CPUShares)
	}
	if rc.CPUPeriod != nil || rc.CPUQuota != nil {
		// As runc: the period first, unless the current quota does not fit
		// the new period.
		quota := func() {
			if rc.CPUQuota != nil {
				w("cpu.cfs_quota_us", *rc.CPUQuota)
			}
		}
		if rc.CPUPeriod != nil {
			if err := writeIfExists(dir, "cpu.cfs_period_us", strconv.FormatInt(*rc.CPUPeriod, 10)); err != nil {
				quota()
				w("cpu.cfs_period_us", *rc.CPUPeriod)
			} else {
				quota()
			}
		} else {
			quota()
		}
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		w("memory.limit_in_bytes", *rc.Memory)
	}
	if rc.PidsLimit != nil {
		v := "max"
		if *rc.PidsLimit > 0 {
			v = strconv.FormatInt(*rc.PidsLimit, 10)
		}
		errs = append(errs, writeIfExists(dir, "pids.max", v))
	}
	if rc.HugePageLimit != nil {
		for _, size := range m.pageSizes {
			v := "-1"
			if l := rc.HugePageLimit[size]; l != math.MaxInt64 {
				v = strconv.FormatInt(l, 10)
			}
			errs = append(errs, writeIfExists(dir, "hugetlb."+byteSizeUnit(size)+".limit_in_bytes", v))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) applyV2(dir string, rc *ResourceConfig) error {
	var errs []error
	w := func(file, v string) { errs = append(errs, writeIfExists(dir, file, v)) }
	if rc.CPUShares != nil {
		w("cpu.weight", strconv.FormatInt(CPUSharesToWeight(*rc.CPUShares), 10))
	}
	if rc.CPUQuota != nil || rc.CPUPeriod != nil {
		quota := "max"
		if rc.CPUQuota != nil && *rc.CPUQuota > 0 {
			quota = strconv.FormatInt(*rc.CPUQuota, 10)
		}
		period := int64(QuotaPeriod)
		if rc.CPUPeriod != nil && *rc.CPUPeriod > 0 {
			period = *rc.CPUPeriod
		}
		w("cpu.max", quota+" "+strconv.FormatInt(period, 10))
	}
	if rc.Memory != nil && *rc.Memory > 0 {
		w("memory.max", strconv.FormatInt(*rc.Memory, 10))
	}
	if rc.PidsLimit != nil {
		v := "max"
		if *rc.PidsLimit > 0 {
			v = strconv.FormatInt(*rc.PidsLimit, 10)
		}
		w("pids.max", v)
	}
	if rc.HugePageLimit != nil {
		for _, size := range m.pageSizes {
			v := "max"
			if l := rc.HugePageLimit[size]; l != math.MaxInt64 {
				v = strconv.FormatInt(l, 10)
			}
			w("hugetlb."+byteSizeUnit(size)+".max", v)
		}
	}
	return errors.Join(errs...)
}

// writeIfExists writes v to dir/file when the file is there (its
// controller is in this hierarchy).
func writeIfExists(dir, file, v string) error {
	p := filepath.Join(dir, file)
	if !exists(p) {
		return nil
	}
	if err := os.WriteFile(p, []byte(v), 0); err != nil {
		return fmt.Errorf("write %s to %s: %w", v, p, err)
	}
	return nil
}

// existsAll tells whether the cgroup n is in every hierarchy.
func (m *Manager) existsAll(n CgroupName) bool {
	for _, h := range m.hierarchies {
		if !exists(m.dir(h, n)) {
			return false
		}
	}
	return true
}

// ErrNotEmpty is returned when a pod cgroup to remove still has processes.
var ErrNotEmpty = errors.New("cgroup still has processes")

// podDirs lists the directories of pod uid's cgroup in every hierarchy,
// whatever its QoS class.
func (m *Manager) podDirs(uid types.UID) []string {
	var out []string
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		n := NewCgroupName(m.qosName(class), podCgroupPrefix+string(uid))
		for _, h := range m.hierarchies {
			if d := m.dir(h, n); exists(d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// RemovePod removes the pod's cgroup, with the empty cgroups the runtime
// left below it, from every hierarchy. A cgroup still holding a process is
// left alone and reported (ErrNotEmpty). No cgroup is no error.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	if !m.cfg.CgroupsPerQOS {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dirs := m.podDirs(uid)
	if err := m.removeLocked(uid, dirs); err != nil {
		m.sweepAt = time.Time{} // left to the next sweep
		return err
	}
	m.forgetLocked(ctx, uid)
	return nil
}

func (m *Manager) forgetLocked(ctx context.Context, uid types.UID) {
	delete(m.ensured, uid)
	if _, ok := m.burstable[uid]; ok {
		delete(m.burstable, uid)
		if err := m.updateBurstableLocked(); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to update the burstable QoS cgroup")
		}
	}
}

func (m *Manager) removeLocked(uid types.UID, dirs []string) error {
	for _, d := range dirs {
		if pids := procsIn(d); len(pids) > 0 {
			return fmt.Errorf("pod %s cgroup %s: %w (%s)", uid, d, ErrNotEmpty, strings.Join(pids, " "))
		}
	}
	var errs []error
	if m.units != nil {
		// One unit per cgroup, whatever the number of v1 hierarchies.
		done := map[string]bool{}
		for _, d := range dirs {
			if p := m.cgroupPath(d); p != "" && !done[p] {
				done[p] = true
				errs = append(errs, m.units.Destroy(p))
			}
		}
	}
	for _, d := range dirs {
		errs = append(errs, m.removeTree(d))
	}
	return errors.Join(errs...)
}

// cgroupPath is the cgroup of a directory of one of the hierarchies, as
// the driver spells it ("" when dir is in none).
func (m *Manager) cgroupPath(dir string) string {
	for _, h := range m.hierarchies {
		if rel, ok := strings.CutPrefix(dir, h+string(filepath.Separator)); ok {
			return "/" + filepath.ToSlash(rel)
		}
	}
	return ""
}

// removeTree removes dir and the cgroups below it, deepest first.
func (m *Manager) removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := m.removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := m.cfg.rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// procsIn lists the processes in dir's cgroup and below.
func procsIn(dir string) []string {
	var out []string
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	out = append(out, strings.Fields(string(data))...)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, procsIn(filepath.Join(dir, e.Name()))...)
		}
	}
	return out
}

// CleanupOrphans removes the cgroups of pods keep does not want: those
// holding no process and not changed for OrphanGrace (what a failed
// RemovePod, or a pod removed while nodelet was down, leaves). It returns
// the pods whose cgroups were removed. It reads the tree (a directory per
// hierarchy and QoS class, dozens on cgroup v1) only when cgroups may have
// been left: at its first call, after a failed RemovePod, when a pod it
// configured is no longer kept, while the last sweep left some, and
// otherwise every OrphanRescan.
func (m *Manager) CleanupOrphans(ctx context.Context, keep func(types.UID) bool) ([]types.UID, error) {
	if !m.cfg.CgroupsPerQOS {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	left := false
	for uid := range m.ensured {
		if !keep(uid) {
			m.forgetLocked(ctx, uid)
			left = true
		}
	}
	for uid := range m.burstable {
		if !keep(uid) {
			m.forgetLocked(ctx, uid)
			left = true
		}
	}
	now := m.cfg.Clock.Now()
	if !left && now.Before(m.sweepAt) {
		return nil, nil
	}
	found := map[types.UID][]string{}
	var order []types.UID
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		qos := m.qosName(class)
		for _, h := range m.hierarchies {
			qdir := m.dir(h, qos)
			entries, _ := os.ReadDir(qdir)
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				n := e.Name()
				uid, ok := m.podUIDFromDir(n)
				if !ok {
					continue
				}
				if _, seen := found[uid]; !seen {
					order = append(order, uid)
				}
				found[uid] = append(found[uid], filepath.Join(qdir, n))
			}
		}
	}
	var removed []types.UID
	var errs []error
	pending := false
	for _, uid := range order {
		dirs := found[uid]
		if keep(uid) {
			continue
		}
		if m.youngerThan(dirs, now.Add(-OrphanGrace)) {
			pending = true
			continue
		}
		err := m.removeLocked(uid, dirs)
		if err != nil {
			pending = true
			if !errors.Is(err, ErrNotEmpty) {
				errs = append(errs, err)
			}
			continue
		}
		removed = append(removed, uid)
	}
	m.sweepAt = now.Add(OrphanRescan)
	if pending {
		m.sweepAt = time.Time{}
	}
	return removed, errors.Join(errs...)
}

// youngerThan tells whether one of dirs changed after t.
func (m *Manager) youngerThan(dirs []string, t time.Time) bool {
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.ModTime().After(t) {
			return true
		}
	}
	return false
}

// podUIDFromDir is the pod UID of a pod cgroup's directory name as this
// manager's driver names it (PodUIDFromDir).
func (m *Manager) podUIDFromDir(name string) (types.UID, bool) {
	if (m.cfg.Driver == DriverSystemd) != strings.HasSuffix(name, ".slice") {
		return "", false
	}
	return PodUIDFromDir(name)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
