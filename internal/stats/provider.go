package stats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/machine"
	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/rootdir"
)

// PodInfo is a pod the node should run, for its volumes and limits.
type PodInfo struct {
	Pod *v1.Pod
	// VolumeDir is <rootDir>/pods/<uid>/volumes; a volume lives in
	// <VolumeDir>/<plugin, e.g. kubernetes.io~empty-dir>/<volume name>.
	VolumeDir string
}

// Config configures a Provider.
type Config struct {
	NodeName string
	// RootDir is the kubelet root directory: the node fs is its filesystem.
	RootDir string
	// PodLogsDir holds the pods' logs (/var/log/pods).
	PodLogsDir string
	// Runtime gives the pods, containers and their stats.
	Runtime internalapi.RuntimeService
	// Images gives the imageFs (ImageFsInfo); nil: no runtime fs stats.
	Images internalapi.ImageManagerService
	// Pods returns the pods the node should run; nil: none known.
	Pods func() []PodInfo
	// Clock stamps the samples (the real clock when nil).
	Clock clock.Clock
	// Machine is the machine's facts: where cgroups are mounted and their
	// version (the node's CPU and memory are its root cgroup's), MemTotal
	// and the boot time. Without a cgroup mount the node has no CPU and
	// memory figures.
	Machine machine.Facts
	// ProcRoot is the host's procfs (/proc by default): meminfo (free
	// memory, swap), net/dev, loadavg and sys/kernel (pid_max,
	// threads-max).
	ProcRoot string
	// PodsCgroup is the pods' cgroup as the driver names it ("/kubepods"):
	// the summary's "pods" system container (allocatableMemory.available).
	// Empty: none.
	PodsCgroup string
	// VolumeStatsAggPeriod is how long a volume's measured usage is reused
	// (volumeStatsAggPeriod; 1 minute when 0).
	VolumeStatsAggPeriod time.Duration
	// Logger is what the /metrics/resource scrapes log to: they have no
	// context of their own (klog's global logger when unset).
	Logger klog.Logger
	// SystemContainers are reported beside "pods" among the node's system
	// containers (the kubelet's and the runtime's cgroups).
	SystemContainers []SystemContainer
	// KubeletStart is when nodelet started: the "pods" system container's
	// start, as upstream's.
	KubeletStart time.Time
	// DriverVolume measures a pod's volume whose driver reports its usage
	// (CSI: NodeGetVolumeStats), false when it does not; nil: none.
	DriverVolume func(ctx context.Context, pod *v1.Pod, v *v1.Volume) (statsv1alpha1.VolumeStats, bool)
}

// Provider computes the node's summary stats and resource metrics. It is
// safe for concurrent use.
type Provider struct {
	cfg   Config
	clock clock.Clock
	// logger is Config.Logger, for the /metrics/resource scrapes, which
	// have no context of their own; everything else logs through its ctx.
	logger klog.Logger

	rates   *rateCache
	volumes *volumeCache

	// resampleDelay is how long after a sample missing rates Summary samples
	// again; 0 disables it.
	resampleDelay time.Duration
	// noSandboxStats is set once the runtime answered Unimplemented to
	// ListPodSandboxStats.
	noSandboxStats atomic.Bool
	// sandboxStatsRetryAt (unix ns) is when ListPodSandboxStats, which
	// failed, may be asked again.
	sandboxStatsRetryAt atomic.Int64
}

// New returns a Provider for cfg. It fails when cfg has no Runtime.
func New(cfg Config) (*Provider, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("stats: Config.Runtime is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = "/var/log/pods"
	}
	ttl := cfg.VolumeStatsAggPeriod
	if ttl <= 0 {
		ttl = volumeCacheTTL
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = klog.Background()
	}
	return &Provider{
		cfg:           cfg,
		clock:         cfg.Clock,
		logger:        cfg.Logger,
		rates:         newRateCache(minWindowDef),
		volumes:       newVolumeCache(ttl),
		resampleDelay: 100 * time.Millisecond,
	}, nil
}

// Summary returns the node's /stats/summary. It fails when the runtime
// cannot be listed; node figures that cannot be read are left out.
func (p *Provider) Summary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	return p.summary(ctx, true)
}

// NodeSummary returns the node's part of the summary alone (memory,
// filesystems, the runtime's filesystems, PIDs), without listing the
// runtime: what the eviction signals are observed from every 10 s.
func (p *Provider) NodeSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	b := &builder{p: p, s: p.nodeSample(ctx), full: true, logger: klog.FromContext(ctx), ctx: ctx, fsByMount: make(map[string]*fsInfo)}
	return &statsv1alpha1.Summary{Node: b.node(ctx)}, nil
}

// sample is one reading of everything the CPU and memory figures come from.
type sample struct {
	at      time.Time
	node    cgroupSample
	meminfo map[string]uint64
	pods    []*rawPod
	// system holds the system containers' samples by name ("pods"
	// included), those that could be read.
	system map[string]cgroupSample
}

// nodeSample reads the node's cgroup and meminfo; what cannot be read is
// left out.
func (p *Provider) nodeSample(ctx context.Context) *sample {
	logger := klog.FromContext(ctx)
	s := &sample{at: p.clock.Now()}
	var err error
	if s.node, err = readRootCgroup(p.cfg.Machine.Cgroups, uint64(p.cfg.Machine.MemoryCapacity), p.cfg.ProcRoot); err != nil {
		logger.V(4).Info("Cannot read all of the root cgroup's stats", "err", err)
	}
	if s.meminfo, err = readMeminfo(p.cfg.ProcRoot); err != nil {
		logger.V(4).Info("Cannot read meminfo", "err", err)
	}
	s.system = make(map[string]cgroupSample)
	for _, sc := range p.systemContainers() {
		cs, err := readCgroupAt(p.cfg.Machine.Cgroups, sc.Cgroup)
		if err != nil {
			logger.V(4).Info("Cannot read all of a system container's stats", "container", sc.Name, "cgroup", sc.Cgroup, "err", err)
		}
		if cs.hasCPU || cs.hasMemory {
			s.system[sc.Name] = cs
		}
	}
	return s
}

// systemContainers are the configured system containers and "pods".
func (p *Provider) systemContainers() []SystemContainer {
	out := append([]SystemContainer(nil), p.cfg.SystemContainers...)
	if p.cfg.PodsCgroup != "" {
		out = append(out, SystemContainer{Name: statsv1alpha1.SystemContainerPods, Cgroup: p.cfg.PodsCgroup, Start: p.cfg.KubeletStart})
	}
	return out
}

func (p *Provider) sample(ctx context.Context) (*sample, error) {
	s := p.nodeSample(ctx)
	var err error
	if s.pods, err = p.listRuntime(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// summary computes the summary; full adds the filesystem, network and limit
// figures and samples again shortly when some rate is not known yet.
// Without full it is what /metrics/resource needs: CPU and memory.
func (p *Provider) summary(ctx context.Context, full bool) (*statsv1alpha1.Summary, error) {
	s, err := p.sample(ctx)
	if err != nil {
		return nil, err
	}
	rates, complete := p.feedRates(s)
	if full && !complete && p.resampleDelay > 0 {
		p.clock.Sleep(p.resampleDelay)
		if s2, err := p.sample(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot sample the stats again for CPU rates", "err", err)
		} else {
			s = s2
			rates, _ = p.feedRates(s)
		}
	}
	p.pruneRates(s)
	return p.build(ctx, s, rates, full), nil
}

// feedRates feeds the cumulative CPU counters of s to the rate cache and
// returns the rates known, by key, and whether every counter had one.
func (p *Provider) feedRates(s *sample) (map[string]uint64, bool) {
	rates := make(map[string]uint64)
	complete := true
	feed := func(key string, nanos uint64, at int64) {
		if r, ok := p.rates.update(key, cpuSample{nanos: nanos, at: at}); ok {
			rates[key] = r
		} else {
			complete = false
		}
	}
	if s.node.hasCPU {
		feed(nodeKey, s.node.cpuNanos, s.at.UnixNano())
	}
	for name, cs := range s.system {
		if cs.hasCPU {
			feed(sysPrefix+name, cs.cpuNanos, s.at.UnixNano())
		}
	}
	for _, rp := range s.pods {
		if cpu := rp.stats.GetLinux().GetCpu(); cpu.GetUsageCoreNanoSeconds() != nil {
			feed(podPrefix+rp.sandbox.Id, cpu.UsageCoreNanoSeconds.Value, timeOr(cpu.Timestamp, s.at).UnixNano())
		}
		for _, rc := range rp.containers {
			if cpu := rc.stats.GetCpu(); cpu.GetUsageCoreNanoSeconds() != nil {
				feed(ctrPrefix+rc.meta.Id, cpu.UsageCoreNanoSeconds.Value, timeOr(cpu.Timestamp, s.at).UnixNano())
			}
		}
	}
	return rates, complete
}

// pruneRates drops the rates of the sandboxes and containers s does not have.
func (p *Provider) pruneRates(s *sample) {
	keep := make(map[string]struct{})
	for _, rp := range s.pods {
		keep[podPrefix+rp.sandbox.Id] = struct{}{}
		for _, rc := range rp.containers {
			keep[ctrPrefix+rc.meta.Id] = struct{}{}
		}
	}
	p.rates.prune(keep)
}

// build turns a sample into a Summary.
func (p *Provider) build(ctx context.Context, s *sample, rates map[string]uint64, full bool) *statsv1alpha1.Summary {
	b := &builder{p: p, s: s, rates: rates, full: full, logger: klog.FromContext(ctx), ctx: ctx, fsByMount: make(map[string]*fsInfo)}
	// The pods' and containers' cgroups: PSI, and swap where the runtime
	// reports none (the resource metrics have swap too).
	b.cgroups = indexPodCgroups(podCgroupIDs(p.cfg.Machine.Cgroups, p.cfg.PodsCgroup))
	out := &statsv1alpha1.Summary{Node: b.node(ctx)}
	var infos map[string]PodInfo
	if p.cfg.Pods != nil {
		pods := p.cfg.Pods()
		infos = make(map[string]PodInfo, len(pods))
		for _, pi := range pods {
			if pi.Pod != nil {
				infos[string(pi.Pod.UID)] = pi
			}
		}
	}
	out.Pods = make([]statsv1alpha1.PodStats, 0, len(s.pods))
	for _, rp := range s.pods {
		out.Pods = append(out.Pods, b.pod(rp, infos[rp.sandbox.GetMetadata().GetUid()]))
	}
	if full {
		p.volumes.prune(s.at)
	}
	return out
}

// builder holds what one build shares.
type builder struct {
	p     *Provider
	s     *sample
	rates map[string]uint64
	full  bool
	// logger is the build's, from its ctx.
	logger klog.Logger
	ctx    context.Context

	rootFs    *fsInfo // statfs(RootDir); nil if unknown
	fsByMount map[string]*fsInfo
	// cgroups are the pods' and containers' cgroups (full builds only):
	// their PSI.
	cgroups podCgroups
}

// pressure reads cgroup id's PSI, logging what it cannot read.
func (b *builder) pressure(id string) pressure {
	pr, err := readPressure(b.p.cfg.Machine.Cgroups, id)
	if err != nil {
		b.logger.V(4).Info("Cannot read the cgroup's PSI", "cgroup", id, "err", err)
	}
	return pr
}

func (b *builder) statfs(path string) *fsInfo {
	if fi, ok := b.fsByMount[path]; ok {
		return fi
	}
	var out *fsInfo
	if fi, err := statfs(path); err != nil {
		b.logger.V(4).Info("Cannot statfs", "path", path, "err", err)
	} else {
		out = &fi
	}
	b.fsByMount[path] = out
	return out
}

func (b *builder) node(ctx context.Context) statsv1alpha1.NodeStats {
	p, s := b.p, b.s
	cg := p.cfg.Machine.Cgroups
	n := statsv1alpha1.NodeStats{NodeName: p.cfg.NodeName}
	// The root cgroup's PSI, as cadvisor's root container (the kernel's
	// system-wide figures).
	var pr pressure
	if cg.Mount != "" {
		pr = b.pressure("/")
	}
	if s.node.hasCPU {
		n.CPU = &statsv1alpha1.CPUStats{
			Time:                 metav1.NewTime(s.at),
			UsageCoreNanoSeconds: ptr(s.node.cpuNanos),
			PSI:                  pr.cpu,
		}
		if r, ok := b.rates[nodeKey]; ok {
			n.CPU.UsageNanoCores = ptr(r)
		}
	}
	if s.node.hasMemory {
		n.Memory = &statsv1alpha1.MemoryStats{
			Time:            metav1.NewTime(s.at),
			UsageBytes:      ptr(s.node.usage),
			WorkingSetBytes: ptr(s.node.workingSet),
			RSSBytes:        ptr(s.node.rss),
			PageFaults:      ptr(s.node.pgfault),
			MajorPageFaults: ptr(s.node.pgmajfault),
			PSI:             pr.memory,
		}
		if total := p.cfg.Machine.MemoryCapacity; total > 0 {
			n.Memory.AvailableBytes = ptr(sub0(uint64(total), s.node.workingSet))
		}
	}
	if p.cfg.PodsCgroup != "" {
		if pm, err := readPodsMemory(p.cfg.Machine.Cgroups, p.cfg.PodsCgroup); err != nil {
			b.logger.V(4).Info("Cannot read the pods' cgroup", "cgroup", p.cfg.PodsCgroup, "err", err)
		} else {
			limit := pm.limit
			if limit == 0 || (p.cfg.Machine.MemoryCapacity > 0 && limit > uint64(p.cfg.Machine.MemoryCapacity)) {
				limit = uint64(p.cfg.Machine.MemoryCapacity)
			}
			psi, err := summaryPSI(cg, p.cfg.PodsCgroup, "memory.pressure")
			if err != nil {
				b.logger.V(4).Info("Cannot read the cgroup's PSI", "cgroup", p.cfg.PodsCgroup, "err", err)
			}
			pods, ok := b.systemContainerStats(statsv1alpha1.SystemContainerPods, p.cfg.PodsCgroup, p.cfg.KubeletStart)
			if !ok {
				pods = statsv1alpha1.ContainerStats{Name: statsv1alpha1.SystemContainerPods, StartTime: metav1.NewTime(p.cfg.KubeletStart)}
			}
			// Pods are limited by node allocatable: their available memory.
			pods.Memory = &statsv1alpha1.MemoryStats{
				Time: metav1.NewTime(s.at), UsageBytes: ptr(pm.usage), WorkingSetBytes: ptr(pm.workingSet),
				AvailableBytes: ptr(sub0(limit, pm.workingSet)), PSI: psi,
			}
			if ok {
				cs := s.system[statsv1alpha1.SystemContainerPods]
				pods.Memory.RSSBytes, pods.Memory.PageFaults, pods.Memory.MajorPageFaults = ptr(cs.rss), ptr(cs.pgfault), ptr(cs.pgmajfault)
			}
			n.SystemContainers = append(n.SystemContainers, pods)
		}
	}
	for _, sc := range p.cfg.SystemContainers {
		if c, ok := b.systemContainerStats(sc.Name, sc.Cgroup, sc.Start); ok {
			n.SystemContainers = append(n.SystemContainers, c)
		}
	}
	if total, ok := s.meminfo["SwapTotal"]; ok {
		free := s.meminfo["SwapFree"]
		n.Swap = &statsv1alpha1.SwapStats{
			Time:               metav1.NewTime(s.at),
			SwapUsageBytes:     ptr(sub0(total, free)),
			SwapAvailableBytes: ptr(free),
		}
	}
	if !b.full {
		return n
	}

	if bt := p.cfg.Machine.BootTime; !bt.IsZero() {
		n.StartTime = metav1.NewTime(bt)
	}
	n.Network = b.nodeNetwork()
	// As cadvisor's root container, where the kernel accounts I/O (v2, or
	// a v1 blkio hierarchy).
	if cg.Mount != "" {
		if _, err := os.Stat(cg.Dir("blkio", "/")); cg.V2 || err == nil {
			n.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(s.at), PSI: pr.io}
		}
	}
	if p.cfg.RootDir != "" {
		b.rootFs = b.statfs(p.cfg.RootDir)
		if b.rootFs != nil {
			n.Fs = b.rootFs.fsStats(s.at)
		}
	}
	n.Runtime = b.runtimeFs(ctx)
	r := readRlimit(p.cfg.ProcRoot)
	if r.hasMaxPID || r.hasProcs {
		n.Rlimit = &statsv1alpha1.RlimitStats{Time: metav1.NewTime(s.at)}
		if r.hasMaxPID {
			n.Rlimit.MaxPID = ptr(r.maxPID)
		}
		if r.hasProcs {
			n.Rlimit.NumOfRunningProcesses = ptr(r.procs)
		}
	}
	return n
}

func (b *builder) nodeNetwork() *statsv1alpha1.NetworkStats {
	f, err := os.Open(filepath.Join(b.p.cfg.ProcRoot, "net", "dev"))
	if err != nil {
		b.logger.V(4).Info("Cannot read the node's network stats", "err", err)
		return nil
	}
	defer f.Close()
	ifaces, err := parseNetDev(f)
	if err != nil {
		b.logger.V(4).Info("Cannot read the node's network stats", "err", err)
		return nil
	}
	ns := &statsv1alpha1.NetworkStats{Time: metav1.NewTime(b.s.at)}
	for _, i := range ifaces {
		if ignoredInterface(i.name) {
			continue
		}
		is := statsv1alpha1.InterfaceStats{
			Name:    i.name,
			RxBytes: ptr(i.rxBytes), RxErrors: ptr(i.rxErrors),
			TxBytes: ptr(i.txBytes), TxErrors: ptr(i.txErrors),
		}
		if i.name == defaultInterfaceName {
			ns.InterfaceStats = is
		}
		ns.Interfaces = append(ns.Interfaces, is)
	}
	return ns
}

func (b *builder) runtimeFs(ctx context.Context) *statsv1alpha1.RuntimeStats {
	if b.p.cfg.Images == nil {
		return nil
	}
	resp, err := b.p.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		b.logger.V(2).Info("Cannot get the image filesystem info", "err", err)
		return nil
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return nil
	}
	rs := &statsv1alpha1.RuntimeStats{ImageFs: b.fsUsage(resp.ImageFilesystems[0])}
	rs.ContainerFs = rs.ImageFs
	if cf := resp.GetContainerFilesystems(); len(cf) > 0 {
		rs.ContainerFs = b.fsUsage(cf[0])
	}
	return rs
}

// fsUsage is the FsStats of a runtime filesystem usage: what the runtime
// says it uses, on the filesystem statfs tells about.
func (b *builder) fsUsage(u *runtimeapi.FilesystemUsage) *statsv1alpha1.FsStats {
	fs := &statsv1alpha1.FsStats{}
	if mp := u.GetFsId().GetMountpoint(); mp != "" {
		if fi := b.statfs(mp); fi != nil {
			fs = fi.base(b.s.at)
		}
	}
	fs.Time = metav1.NewTime(timeOr(u.GetTimestamp(), b.s.at))
	fs.UsedBytes = uint64Value(u.GetUsedBytes())
	fs.InodesUsed = uint64Value(u.GetInodesUsed())
	return fs
}

func (b *builder) pod(rp *rawPod, info PodInfo) statsv1alpha1.PodStats {
	meta := rp.sandbox.GetMetadata()
	ps := statsv1alpha1.PodStats{
		PodRef: statsv1alpha1.PodReference{
			Name:      meta.GetName(),
			Namespace: meta.GetNamespace(),
			UID:       meta.GetUid(),
		},
		// As upstream, the pod's start time is the sandbox's creation.
		StartTime:  metav1.NewTime(time.Unix(0, rp.sandbox.CreatedAt)),
		Containers: make([]statsv1alpha1.ContainerStats, 0, len(rp.containers)),
	}
	for _, rc := range rp.containers {
		ps.Containers = append(ps.Containers, b.container(rc, meta, info.Pod))
	}

	if rp.stats != nil {
		linux := rp.stats.GetLinux()
		if cpu := linux.GetCpu(); cpu != nil {
			ps.CPU = b.cpu(cpu, podPrefix+rp.sandbox.Id)
		}
		if mem := linux.GetMemory(); mem != nil {
			var limit *uint64
			if info.Pod != nil {
				limit = podMemoryLimit(info.Pod)
			}
			ps.Memory = b.memory(mem, limit)
		}
		if net := linux.GetNetwork(); net != nil {
			ps.Network = b.podNetwork(net)
		}
		if pr := linux.GetProcess(); pr.GetProcessCount() != nil {
			ps.ProcessStats = &statsv1alpha1.ProcessStats{ProcessCount: ptr(pr.ProcessCount.Value)}
		}
		if io := linux.GetIo(); io != nil && b.full {
			ps.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(timeOr(io.Timestamp, b.s.at)), PSI: criPSI(io.Psi)}
		}
	} else {
		sumContainers(&ps)
		if ps.Memory != nil && info.Pod != nil {
			if limit := podMemoryLimit(info.Pod); limit != nil {
				ps.Memory.AvailableBytes = ptr(sub0(*limit, deref(ps.Memory.WorkingSetBytes)))
			}
		}
	}

	// The pod cgroup's swap, as upstream reports cadvisor's for it.
	if id, ok := b.cgroups.byUID[meta.GetUid()]; ok {
		ps.Swap = cgroupSwap(b.p.cfg.Machine.Cgroups, id, b.s.at)
	}
	if b.full {
		// The pod cgroup's PSI, as upstream reports cadvisor's for it
		// (the runtime's otherwise; none when summed from the containers).
		if id, ok := b.cgroups.byUID[meta.GetUid()]; ok {
			pr := b.pressure(id)
			if ps.CPU != nil {
				ps.CPU.PSI = pr.cpu
			}
			if ps.Memory != nil {
				ps.Memory.PSI = pr.memory
			}
			ps.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(b.s.at), PSI: pr.io}
		}
		b.podStorage(&ps, rp, info)
	}
	return ps
}

// sumContainers sets the pod's CPU and memory to the sum of its
// containers', as upstream does without pod cgroup stats. availableBytes is
// summed only if every container has one.
func sumContainers(ps *statsv1alpha1.PodStats) {
	allAvailable := true
	for _, c := range ps.Containers {
		if c.CPU != nil {
			if ps.CPU == nil {
				ps.CPU = &statsv1alpha1.CPUStats{}
			}
			ps.CPU.Time = c.CPU.Time
			ps.CPU.UsageCoreNanoSeconds = ptr(deref(ps.CPU.UsageCoreNanoSeconds) + deref(c.CPU.UsageCoreNanoSeconds))
			ps.CPU.UsageNanoCores = ptr(deref(ps.CPU.UsageNanoCores) + deref(c.CPU.UsageNanoCores))
		}
		if c.Memory != nil {
			if ps.Memory == nil {
				ps.Memory = &statsv1alpha1.MemoryStats{}
			}
			m := ps.Memory
			m.Time = c.Memory.Time
			m.UsageBytes = ptr(deref(m.UsageBytes) + deref(c.Memory.UsageBytes))
			m.WorkingSetBytes = ptr(deref(m.WorkingSetBytes) + deref(c.Memory.WorkingSetBytes))
			m.RSSBytes = ptr(deref(m.RSSBytes) + deref(c.Memory.RSSBytes))
			m.PageFaults = ptr(deref(m.PageFaults) + deref(c.Memory.PageFaults))
			m.MajorPageFaults = ptr(deref(m.MajorPageFaults) + deref(c.Memory.MajorPageFaults))
			if c.Memory.AvailableBytes == nil {
				allAvailable = false
			}
			m.AvailableBytes = ptr(deref(m.AvailableBytes) + deref(c.Memory.AvailableBytes))
		}
	}
	if ps.Memory != nil && !allAvailable {
		ps.Memory.AvailableBytes = nil
	}
	// As upstream: the first container's IO time, without PSI.
	for _, c := range ps.Containers {
		if c.IO != nil {
			ps.IO = &statsv1alpha1.IOStats{Time: c.IO.Time}
			break
		}
	}
}

func (b *builder) cpu(cpu *runtimeapi.CpuUsage, key string) *statsv1alpha1.CPUStats {
	out := &statsv1alpha1.CPUStats{
		Time:                 metav1.NewTime(timeOr(cpu.Timestamp, b.s.at)),
		UsageCoreNanoSeconds: uint64Value(cpu.UsageCoreNanoSeconds),
		PSI:                  criPSI(cpu.Psi),
	}
	if r, ok := b.rates[key]; ok {
		out.UsageNanoCores = ptr(r)
	} else if cpu.UsageCoreNanoSeconds == nil {
		// No counter to compute a rate from: the runtime's rate, if any.
		out.UsageNanoCores = uint64Value(cpu.UsageNanoCores)
	}
	return out
}

// memory converts the runtime's memory usage. availableBytes is limit minus
// the working set when the limit is known; otherwise the runtime's figure,
// unless it is 0 (containerd reports 0 for "no limit").
func (b *builder) memory(mem *runtimeapi.MemoryUsage, limit *uint64) *statsv1alpha1.MemoryStats {
	out := &statsv1alpha1.MemoryStats{
		Time:            metav1.NewTime(timeOr(mem.Timestamp, b.s.at)),
		UsageBytes:      uint64Value(mem.UsageBytes),
		WorkingSetBytes: uint64Value(mem.WorkingSetBytes),
		RSSBytes:        uint64Value(mem.RssBytes),
		PageFaults:      uint64Value(mem.PageFaults),
		MajorPageFaults: uint64Value(mem.MajorPageFaults),
		PSI:             criPSI(mem.Psi),
	}
	switch {
	case limit != nil:
		out.AvailableBytes = ptr(sub0(*limit, deref(out.WorkingSetBytes)))
	case mem.AvailableBytes != nil && mem.AvailableBytes.Value > 0:
		out.AvailableBytes = ptr(mem.AvailableBytes.Value)
	}
	return out
}

func (b *builder) podNetwork(net *runtimeapi.NetworkUsage) *statsv1alpha1.NetworkStats {
	conv := func(i *runtimeapi.NetworkInterfaceUsage) statsv1alpha1.InterfaceStats {
		return statsv1alpha1.InterfaceStats{
			Name:     i.GetName(),
			RxBytes:  uint64Value(i.GetRxBytes()),
			RxErrors: uint64Value(i.GetRxErrors()),
			TxBytes:  uint64Value(i.GetTxBytes()),
			TxErrors: uint64Value(i.GetTxErrors()),
		}
	}
	// containerd leaves the timestamp 0.
	ns := &statsv1alpha1.NetworkStats{Time: metav1.NewTime(timeOr(net.Timestamp, b.s.at))}
	if d := net.GetDefaultInterface(); d != nil {
		ns.InterfaceStats = conv(d)
	}
	for _, i := range net.GetInterfaces() {
		if i != nil {
			ns.Interfaces = append(ns.Interfaces, conv(i))
		}
	}
	// containerd gives the default interface only; list it as cAdvisor does.
	if len(ns.Interfaces) == 0 && ns.Name != "" {
		ns.Interfaces = []statsv1alpha1.InterfaceStats{ns.InterfaceStats}
	}
	return ns
}

func (b *builder) container(rc rawContainer, meta *runtimeapi.PodSandboxMetadata, pod *v1.Pod) statsv1alpha1.ContainerStats {
	st := rc.stats
	name := rc.meta.GetMetadata().GetName()
	cs := statsv1alpha1.ContainerStats{
		Name: name,
		// As upstream, the container's start time is its creation.
		StartTime: metav1.NewTime(time.Unix(0, rc.meta.CreatedAt)),
	}
	if cpu := st.GetCpu(); cpu != nil {
		cs.CPU = b.cpu(cpu, ctrPrefix+rc.meta.Id)
	} else {
		cs.CPU = &statsv1alpha1.CPUStats{Time: metav1.NewTime(b.s.at), UsageCoreNanoSeconds: ptr[uint64](0), UsageNanoCores: ptr[uint64](0)}
	}
	if mem := st.GetMemory(); mem != nil {
		var limit *uint64
		if pod != nil {
			limit = containerMemoryLimit(pod, name)
		}
		cs.Memory = b.memory(mem, limit)
	} else {
		cs.Memory = &statsv1alpha1.MemoryStats{Time: metav1.NewTime(b.s.at), WorkingSetBytes: ptr[uint64](0)}
	}
	if sw := st.GetSwap(); sw != nil {
		cs.Swap = &statsv1alpha1.SwapStats{
			Time:               metav1.NewTime(timeOr(sw.Timestamp, b.s.at)),
			SwapUsageBytes:     uint64Value(sw.SwapUsageBytes),
			SwapAvailableBytes: uint64Value(sw.SwapAvailableBytes),
		}
	} else if id, ok := b.cgroups.byID[rc.meta.Id]; ok {
		cs.Swap = cgroupSwap(b.p.cfg.Machine.Cgroups, id, b.s.at)
	}
	if !b.full {
		return cs
	}

	// PSI: the container cgroup's, as upstream reports cadvisor's for it,
	// else the runtime's. IO is always there, as upstream's.
	cs.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(b.s.at)}
	if io := st.GetIo(); io != nil {
		cs.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(timeOr(io.Timestamp, b.s.at)), PSI: criPSI(io.Psi)}
	}
	if id, ok := b.cgroups.byID[rc.meta.Id]; ok {
		pr := b.pressure(id)
		cs.CPU.PSI, cs.Memory.PSI = pr.cpu, pr.memory
		cs.IO = &statsv1alpha1.IOStats{Time: metav1.NewTime(b.s.at), PSI: pr.io}
	}

	cs.Rootfs = &statsv1alpha1.FsStats{Time: metav1.NewTime(b.s.at)}
	if wl := st.GetWritableLayer(); wl != nil {
		cs.Rootfs = b.fsUsage(wl)
	}
	dir := filepath.Join(podLogDir(b.p.cfg.PodLogsDir, meta), name)
	if u, err := filesUsage(dir); err != nil {
		b.logger.V(4).Info("Cannot measure the container's logs", "dir", dir, "err", err)
	} else {
		cs.Logs = b.onRootFs(u)
	}
	return cs
}

// onRootFs is the FsStats of something using u on the node's root fs.
func (b *builder) onRootFs(u usage) *statsv1alpha1.FsStats {
	fs := &statsv1alpha1.FsStats{Time: metav1.NewTime(b.s.at)}
	if b.rootFs != nil {
		fs = b.rootFs.base(b.s.at)
	}
	fs.UsedBytes = ptr(u.bytes)
	fs.InodesUsed = ptr(u.inodes)
	return fs
}

// podLogDir is <podLogsDir>/<namespace>_<name>_<uid>.
func podLogDir(podLogsDir string, meta *runtimeapi.PodSandboxMetadata) string {
	return filepath.Join(podLogsDir, meta.GetNamespace()+"_"+meta.GetName()+"_"+meta.GetUid())
}

// podStorage adds the pod's volume stats and ephemeral storage.
func (b *builder) podStorage(ps *statsv1alpha1.PodStats, rp *rawPod, info PodInfo) {
	var ephemeral []statsv1alpha1.VolumeStats
	if info.Pod != nil && info.VolumeDir != "" {
		for _, v := range info.Pod.Spec.Volumes {
			vs, ok := b.volume(info.VolumeDir, &v)
			if !ok && b.p.cfg.DriverVolume != nil && b.ctx != nil {
				vs, ok = b.p.cfg.DriverVolume(b.ctx, info.Pod, &v)
			}
			if !ok {
				continue
			}
			ps.VolumeStats = append(ps.VolumeStats, vs)
			if podspec.IsLocalEphemeralVolume(&v) {
				ephemeral = append(ephemeral, vs)
			}
		}
	}

	es := &statsv1alpha1.FsStats{Time: metav1.NewTime(b.s.at)}
	if b.rootFs != nil {
		es = b.rootFs.base(b.s.at)
	}
	add := func(fs *statsv1alpha1.FsStats, inodes bool) {
		es.UsedBytes = addUsage(es.UsedBytes, fs.UsedBytes)
		if inodes {
			es.InodesUsed = addUsage(es.InodesUsed, fs.InodesUsed)
		}
		if es.Time.Before(&fs.Time) {
			es.Time = fs.Time
		}
	}
	for _, c := range ps.Containers {
		if c.Rootfs == nil {
			continue
		}
		add(c.Rootfs, true)
		if c.Logs != nil {
			add(c.Logs, true)
		}
	}
	for i := range ephemeral {
		add(&ephemeral[i].FsStats, true)
	}
	meta := rp.sandbox.GetMetadata()
	if u, err := filesUsage(podLogDir(b.p.cfg.PodLogsDir, meta)); err == nil {
		add(b.onRootFs(u), true)
	}
	if b.p.cfg.RootDir != "" {
		hosts := rootdir.Dir(b.p.cfg.RootDir).PodEtcHosts(types.UID(meta.GetUid()))
		if u, err := diskUsage(hosts); err == nil {
			add(b.onRootFs(u), true)
		}
	}
	ps.EphemeralStorage = es
}

// volume measures one of the pod's volumes, if it is of a kind whose usage
// the kubelet reports and it exists.
func (b *builder) volume(volumeDir string, v *v1.Volume) (statsv1alpha1.VolumeStats, bool) {
	plugin := pluginDir(v)
	if plugin == "" {
		return statsv1alpha1.VolumeStats{}, false
	}
	path := filepath.Join(volumeDir, plugin, v.Name)
	u, at, err := b.p.volumes.get(path, b.s.at, diskUsage)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			b.logger.V(4).Info("Cannot measure a volume", "path", path, "err", err)
		}
		return statsv1alpha1.VolumeStats{}, false
	}
	fs := statsv1alpha1.FsStats{Time: metav1.NewTime(at)}
	// Not b.statfs: a volume may be its own mount (tmpfs).
	if fi, err := statfs(path); err == nil {
		fs = *fi.base(at)
	}
	fs.UsedBytes = ptr(u.bytes)
	fs.InodesUsed = ptr(u.inodes)
	return statsv1alpha1.VolumeStats{Name: v.Name, FsStats: fs}, true
}

// pluginDir names a volume's directory as upstream's plugins do, for the
// kinds measured here; "" for the others.
func pluginDir(v *v1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return "kubernetes.io~empty-dir"
	case v.ConfigMap != nil:
		return "kubernetes.io~configmap"
	case v.Secret != nil:
		return "kubernetes.io~secret"
	case v.Projected != nil:
		return "kubernetes.io~projected"
	case v.DownwardAPI != nil:
		return "kubernetes.io~downward-api"
	}
	return ""
}

// containerMemoryLimit is the memory limit of pod's container name, if set.
func containerMemoryLimit(pod *v1.Pod, name string) *uint64 {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return memoryLimit(list[i].Resources.Limits)
			}
		}
	}
	return nil
}

// podMemoryLimit is the memory limit of the pod's cgroup, if it has one: the
// pod-level limit, or, when every container has one, the larger of the sum
// of the containers' (sidecars included) and of any init container's, plus
// the pod overhead.
func podMemoryLimit(pod *v1.Pod) *uint64 {
	if r := pod.Spec.Resources; r != nil {
		if l := memoryLimit(r.Limits); l != nil {
			return l
		}
	}
	var sum, maxInit uint64
	for _, c := range pod.Spec.Containers {
		l := memoryLimit(c.Resources.Limits)
		if l == nil {
			return nil
		}
		sum += *l
	}
	for _, c := range pod.Spec.InitContainers {
		l := memoryLimit(c.Resources.Limits)
		if l == nil {
			return nil
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += *l
		} else {
			maxInit = max(maxInit, *l)
		}
	}
	limit := max(sum, maxInit)
	if l := memoryLimit(pod.Spec.Overhead); l != nil {
		limit += *l
	}
	return &limit
}

func memoryLimit(rl v1.ResourceList) *uint64 {
	q, ok := rl[v1.ResourceMemory]
	if !ok || q.Sign() <= 0 {
		return nil
	}
	return ptr(uint64(q.Value()))
}

// timeOr is the unix-ns timestamp ns, or fallback if it is unset.
func timeOr(ns int64, fallback time.Time) time.Time {
	if ns <= 0 {
		return fallback
	}
	return time.Unix(0, ns)
}

func addUsage(a, b *uint64) *uint64 {
	if a == nil {
		if b == nil {
			return nil
		}
		return ptr(*b)
	}
	if b == nil {
		return a
	}
	return ptr(*a + *b)
}

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

func sub0(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}
