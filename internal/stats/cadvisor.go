package stats

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// CadvisorCollector returns the collector of /metrics/cadvisor: cadvisor's
// metric families, names and labels (container, id, image, name, namespace,
// pod, as upstream's kubelet sets them) for the root cgroup ("/"), the pods'
// cgroup and every cgroup below it (QoS classes, pods, sandboxes,
// containers), read from the cgroup files at each scrape as cadvisor reads
// them, with the runtime's names (one ListPodSandbox, ListContainers and
// ListContainerStats a scrape), plus the machine_* families. No cadvisor
// manager runs: nothing is kept between scrapes.
func (p *Provider) CadvisorCollector() prometheus.Collector {
	return &cadvisorCollector{p: p, sys: "/sys"}
}

type cadvisorCollector struct {
	p *Provider
	// sys is /sys (block device names).
	sys string
	// pause is the runtime's sandbox image once it said (it does not change
	// while the runtime runs): one verbose Status, not one a scrape.
	pause atomic.Pointer[string]
}

var sandboxImagePattern = regexp.MustCompile(`"sandboxImage":\s*"([^"]+)"`)

// cadvisor's container labels, in this order on every container metric.
var containerLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

type cadvisorDesc struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	labels []string // beyond containerLabels
}

func newCadvisorDesc(name, help string, typ prometheus.ValueType, extra ...string) cadvisorDesc {
	return cadvisorDesc{desc: prometheus.NewDesc(name, help, append(append([]string{}, containerLabels...), extra...), nil), typ: typ, labels: extra}
}

var (
	cCPUUsage        = newCadvisorDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", prometheus.CounterValue, "cpu")
	cCPUUser         = newCadvisorDesc("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", prometheus.CounterValue)
	cCPUSystem       = newCadvisorDesc("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", prometheus.CounterValue)
	cCFSPeriods      = newCadvisorDesc("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", prometheus.CounterValue)
	cCFSThrottled    = newCadvisorDesc("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", prometheus.CounterValue)
	cCFSThrottledSec = newCadvisorDesc("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", prometheus.CounterValue)
	cMemUsage        = newCadvisorDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", prometheus.GaugeValue)
	cMemMaxUsage     = newCadvisorDesc("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", prometheus.GaugeValue)
	cMemWorkingSet   = newCadvisorDesc("container_memory_working_set_bytes", "Current working set in bytes.", prometheus.GaugeValue)
	cMemRSS          = newCadvisorDesc("container_memory_rss", "Size of RSS in bytes.", prometheus.GaugeValue)
	cMemCache        = newCadvisorDesc("container_memory_cache", "Number of bytes of page cache memory.", prometheus.GaugeValue)
	cMemMapped       = newCadvisorDesc("container_memory_mapped_file", "Size of memory mapped files in bytes.", prometheus.GaugeValue)
	cMemSwap         = newCadvisorDesc("container_memory_swap", "Container swap usage in bytes.", prometheus.GaugeValue)
	cMemFailcnt      = newCadvisorDesc("container_memory_failcnt", "Number of memory usage hits limits", prometheus.CounterValue)
	cMemFailures     = newCadvisorDesc("container_memory_failures_total", "Cumulative count of memory allocation failures.", prometheus.CounterValue, "failure_type", "scope")
	cOOMEvents       = newCadvisorDesc("container_oom_events_total", "Count of out of memory events observed for the container", prometheus.CounterValue)
	cSpecCPUPeriod   = newCadvisorDesc("container_spec_cpu_period", "CPU period of the container.", prometheus.GaugeValue)
	cSpecCPUQuota    = newCadvisorDesc("container_spec_cpu_quota", "CPU quota of the container.", prometheus.GaugeValue)
	cSpecCPUShares   = newCadvisorDesc("container_spec_cpu_shares", "CPU share of the container.", prometheus.GaugeValue)
	cSpecMemLimit    = newCadvisorDesc("container_spec_memory_limit_bytes", "Memory limit for the container.", prometheus.GaugeValue)
	cSpecMemReserve  = newCadvisorDesc("container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", prometheus.GaugeValue)
	cSpecMemSwap     = newCadvisorDesc("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", prometheus.GaugeValue)
	cFsReadBytes     = newCadvisorDesc("container_fs_reads_bytes_total", "Cumulative count of bytes read", prometheus.CounterValue, "device")
	cFsWriteBytes    = newCadvisorDesc("container_fs_writes_bytes_total", "Cumulative count of bytes written", prometheus.CounterValue, "device")
	cFsReads         = newCadvisorDesc("container_fs_reads_total", "Cumulative count of reads completed", prometheus.CounterValue, "device")
	cFsWrites        = newCadvisorDesc("container_fs_writes_total", "Cumulative count of writes completed", prometheus.CounterValue, "device")
	cFsUsage         = newCadvisorDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", prometheus.GaugeValue, "device")
	cFsLimit         = newCadvisorDesc("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", prometheus.GaugeValue, "device")
	cFsInodes        = newCadvisorDesc("container_fs_inodes_total", "Number of available Inodes", prometheus.GaugeValue, "device")
	cFsInodesFree    = newCadvisorDesc("container_fs_inodes_free", "Number of available Inodes", prometheus.GaugeValue, "device")
	cNetRxBytes      = newCadvisorDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", prometheus.CounterValue, "interface")
	cNetRxPackets    = newCadvisorDesc("container_network_receive_packets_total", "Cumulative count of packets received", prometheus.CounterValue, "interface")
	cNetRxDropped    = newCadvisorDesc("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", prometheus.CounterValue, "interface")
	cNetRxErrors     = newCadvisorDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", prometheus.CounterValue, "interface")
	cNetTxBytes      = newCadvisorDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", prometheus.CounterValue, "interface")
	cNetTxPackets    = newCadvisorDesc("container_network_transmit_packets_total", "Cumulative count of packets transmitted", prometheus.CounterValue, "interface")
	cNetTxDropped    = newCadvisorDesc("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", prometheus.CounterValue, "interface")
	cNetTxErrors     = newCadvisorDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", prometheus.CounterValue, "interface")
	cProcesses       = newCadvisorDesc("container_processes", "Number of processes running inside the container.", prometheus.GaugeValue)
	cThreads         = newCadvisorDesc("container_threads", "Number of threads running inside the container", prometheus.GaugeValue)
	cThreadsMax      = newCadvisorDesc("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", prometheus.GaugeValue)
	cMemActiveFile   = newCadvisorDesc("container_memory_total_active_file_bytes", "Current total active file in bytes.", prometheus.GaugeValue)
	cMemInactiveFile = newCadvisorDesc("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", prometheus.GaugeValue)
	cMemDirty        = newCadvisorDesc("container_memory_file_dirty_bytes", "Size of memory that are waiting to get written back to the disk in bytes", prometheus.GaugeValue)
	cMemWriteback    = newCadvisorDesc("container_memory_file_writeback_bytes", "Size of memory that are queued for syncing to the disk in bytes", prometheus.GaugeValue)
	cMemRefaultAnon  = newCadvisorDesc("container_memory_workingset_refault_anon_total", "Number of refaults on anonymous pages", prometheus.CounterValue)
	cMemRefaultFile  = newCadvisorDesc("container_memory_workingset_refault_file_total", "Number of refaults on file pages", prometheus.CounterValue)
	cMemKernel       = newCadvisorDesc("container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", prometheus.GaugeValue)
	cMemEventsHigh   = newCadvisorDesc("container_memory_events_high_total", "Number of times the memory usage exceeded the high boundary", prometheus.CounterValue)
	cMemEventsMax    = newCadvisorDesc("container_memory_events_max_total", "Number of times the memory usage hit the max limit", prometheus.CounterValue)
	cMemPgscan       = newCadvisorDesc("container_memory_pgscan_total", "Amount of scanned pages (in an inactive LRU list)", prometheus.CounterValue)
	cMemPgsteal      = newCadvisorDesc("container_memory_pgsteal_total", "Amount of reclaimed pages", prometheus.CounterValue)
	cCFSBurstPeriods = newCadvisorDesc("container_cpu_cfs_burst_periods_total", "Number of periods when burst occurs.", prometheus.CounterValue)
	cCFSBurstSeconds = newCadvisorDesc("container_cpu_cfs_burst_seconds_total", "Total time duration the container has been bursted.", prometheus.CounterValue)
	cBlkioDevice     = newCadvisorDesc("container_blkio_device_usage_total", "Blkio Device bytes usage", prometheus.CounterValue, "device", "major", "minor", "operation")
	cFDs             = newCadvisorDesc("container_file_descriptors", "Number of open file descriptors for the container.", prometheus.GaugeValue)
	cSockets         = newCadvisorDesc("container_sockets", "Number of open sockets for the container.", prometheus.GaugeValue)
	cUlimits         = newCadvisorDesc("container_ulimits_soft", "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice", prometheus.GaugeValue, "ulimit")
	cCreationTime    = newCadvisorDesc("container_creation_time_seconds", "Creation time of the container since unix epoch in seconds.", prometheus.GaugeValue)
	cStartTime       = newCadvisorDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", prometheus.GaugeValue)
	cLastSeen        = newCadvisorDesc("container_last_seen", "Last time a container was seen by the exporter", prometheus.GaugeValue)

	// cadvisor's PSI families (its PressureMetrics), served by upstream's
	// kubelet where the kernel has PSI: "full" is stalled, "some" waiting.
	cPressureCPUStalled = newCadvisorDesc("container_pressure_cpu_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to CPU congestion.", prometheus.CounterValue)
	cPressureCPUWaiting = newCadvisorDesc("container_pressure_cpu_waiting_seconds_total", "Total time duration tasks in the container have waited due to CPU congestion.", prometheus.CounterValue)
	cPressureMemStalled = newCadvisorDesc("container_pressure_memory_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to memory congestion.", prometheus.CounterValue)
	cPressureMemWaiting = newCadvisorDesc("container_pressure_memory_waiting_seconds_total", "Total time duration tasks in the container have waited due to memory congestion.", prometheus.CounterValue)
	cPressureIOStalled  = newCadvisorDesc("container_pressure_io_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to IO congestion.", prometheus.CounterValue)
	cPressureIOWaiting  = newCadvisorDesc("container_pressure_io_waiting_seconds_total", "Total time duration tasks in the container have waited due to IO congestion.", prometheus.CounterValue)
	pressureFiles       = []struct {
		file             string
		stalled, waiting cadvisorDesc
	}{
		{"cpu.pressure", cPressureCPUStalled, cPressureCPUWaiting},
		{"memory.pressure", cPressureMemStalled, cPressureMemWaiting},
		{"io.pressure", cPressureIOStalled, cPressureIOWaiting},
	}

	cadvisorContainerDescs = []cadvisorDesc{cCPUUsage, cCPUUser, cCPUSystem, cCFSPeriods, cCFSThrottled, cCFSThrottledSec,
		cMemUsage, cMemMaxUsage, cMemWorkingSet, cMemRSS, cMemCache, cMemMapped, cMemSwap, cMemFailcnt, cMemFailures, cOOMEvents,
		cSpecCPUPeriod, cSpecCPUQuota, cSpecCPUShares, cSpecMemLimit, cSpecMemReserve, cSpecMemSwap,
		cFsReadBytes, cFsWriteBytes, cFsReads, cFsWrites, cFsUsage, cFsLimit, cFsInodes, cFsInodesFree,
		cNetRxBytes, cNetRxPackets, cNetRxDropped, cNetRxErrors, cNetTxBytes, cNetTxPackets, cNetTxDropped, cNetTxErrors,
		cProcesses, cThreads, cThreadsMax, cStartTime, cLastSeen,
		cMemActiveFile, cMemInactiveFile, cMemDirty, cMemWriteback, cMemRefaultAnon, cMemRefaultFile, cMemKernel,
		cMemEventsHigh, cMemEventsMax, cMemPgscan, cMemPgsteal, cCFSBurstPeriods, cCFSBurstSeconds, cBlkioDevice,
		cFDs, cSockets, cUlimits, cCreationTime,
		cPressureCPUStalled, cPressureCPUWaiting, cPressureMemStalled, cPressureMemWaiting, cPressureIOStalled, cPressureIOWaiting}

	machineLabels       = []string{"boot_id", "machine_id", "system_uuid"}
	mCPUCores           = prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", machineLabels, nil)
	mCPUPhysicalCores   = prometheus.NewDesc("machine_cpu_physical_cores", "Number of physical CPU cores.", machineLabels, nil)
	mCPUSockets         = prometheus.NewDesc("machine_cpu_sockets", "Number of CPU sockets.", machineLabels, nil)
	mMemoryBytes        = prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", machineLabels, nil)
	mSwapBytes          = prometheus.NewDesc("machine_swap_bytes", "Amount of swap memory available on the machine.", machineLabels, nil)
	mScrapeError        = prometheus.NewDesc("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", nil, nil)
	cContainerScrapeErr = prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cadvisorContainerDescs {
		ch <- d.desc
	}
	for _, d := range []*prometheus.Desc{mCPUCores, mCPUPhysicalCores, mCPUSockets, mMemoryBytes, mSwapBytes, mScrapeError, cContainerScrapeErr} {
		ch <- d
	}
}

// cgroupRef is one cgroup the scrape reports, with its runtime names.
type cgroupRef struct {
	// id is the cgroup's path below the hierarchy ("/", "/kubepods/...").
	id string
	// labels: container, image, name, namespace, pod (id is added).
	container, image, name, namespace, pod string
	// sandbox: the pod's network is reported on it (its processes are in
	// the pod's network namespace), as cadvisor does for the pause container.
	sandbox, root bool
	created       time.Time
	// fs is the runtime's writable-layer usage (containers only).
	fs *runtimeapi.FilesystemUsage
}

func (r *cgroupRef) values() []string {
	return []string{r.container, r.id, r.image, r.name, r.namespace, r.pod}
}

// containerIDPattern finds the runtime's ID in a container's cgroup name
// (cgroupfs: the ID itself; systemd: cri-containerd-<id>.scope, crio-<id>.scope).
var containerIDPattern = regexp.MustCompile(`([0-9a-f]{64})`)

func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx := klog.NewContext(context.Background(), c.p.logger)
	c.collectMachine(ch)
	refs, err := c.cgroups(ctx)
	scrapeErr := 0.0
	if err != nil {
		scrapeErr = 1
		c.p.logger.Error(err, "Error listing the runtime's containers for /metrics/cadvisor")
	}
	now := c.p.clock.Now()
	psi := psiEnabled(c.p.cfg.Machine.Cgroups)
	for _, r := range refs {
		c.collectCgroup(ch, r, now, psi)
	}
	ch <- prometheus.MustNewConstMetric(cContainerScrapeErr, prometheus.GaugeValue, scrapeErr)
}

func (c *cadvisorCollector) collectMachine(ch chan<- prometheus.Metric) {
	m := c.p.cfg.Machine
	lv := []string{m.BootID, m.MachineID, m.SystemUUID}
	ch <- prometheus.MustNewConstMetric(mCPUCores, prometheus.GaugeValue, float64(m.NumCPU), lv...)
	ch <- prometheus.MustNewConstMetric(mMemoryBytes, prometheus.GaugeValue, float64(m.MemoryCapacity), lv...)
	scrapeErr := 0.0
	if mi, err := readMeminfo(c.p.cfg.ProcRoot); err == nil {
		ch <- prometheus.MustNewConstMetric(mSwapBytes, prometheus.GaugeValue, float64(mi["SwapTotal"]), lv...)
	} else {
		scrapeErr = 1
	}
	cores, sockets, err := cpuTopology(filepath.Join(c.p.cfg.ProcRoot, "cpuinfo"))
	if err != nil {
		scrapeErr = 1
	} else {
		ch <- prometheus.MustNewConstMetric(mCPUPhysicalCores, prometheus.GaugeValue, float64(cores), lv...)
		ch <- prometheus.MustNewConstMetric(mCPUSockets, prometheus.GaugeValue, float64(sockets), lv...)
	}
	ch <- prometheus.MustNewConstMetric(mScrapeError, prometheus.GaugeValue, scrapeErr)
}

// cpuTopology counts the physical cores and sockets of /proc/cpuinfo
// (distinct "physical id" and "physical id"+"core id" pairs; a machine that
// lists neither counts its processors as cores of one socket, as cadvisor).
func cpuTopology(path string) (cores, sockets int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	socketSet, coreSet := map[string]bool{}, map[string]bool{}
	processors := 0
	phys := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			processors++
			phys = ""
		case "physical id":
			phys = v
			socketSet[v] = true
		case "core id":
			coreSet[phys+"/"+v] = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if len(coreSet) == 0 {
		return processors, 1, nil
	}
	return len(coreSet), max(1, len(socketSet)), nil
}

// cgroups lists the cgroups to report: "/", the pods' cgroup and the tree
// below it, each named by the runtime where it is a sandbox or container.
func (c *cadvisorCollector) cgroups(ctx context.Context) ([]*cgroupRef, error) {
	cg := c.p.cfg.Machine.Cgroups
	if cg.Mount == "" {
		return nil, errors.New("no cgroup mount")
	}
	refs := []*cgroupRef{{id: "/", root: true}}
	for _, id := range podCgroupIDs(cg, c.p.cfg.PodsCgroup) {
		refs = append(refs, &cgroupRef{id: id})
	}
	rt := c.p.cfg.Runtime
	boxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return refs, err
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return refs, err
	}
	fsByID := map[string]*runtimeapi.FilesystemUsage{}
	if st, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{}); err == nil {
		for _, s := range st {
			if s.WritableLayer != nil && s.Attributes != nil {
				fsByID[s.Attributes.Id] = s.WritableLayer
			}
		}
	}
	sandboxImage := c.sandboxImage(ctx)
	imageName := c.imageNames(ctx)
	byID := map[string]func(r *cgroupRef){}
	for _, b := range boxes {
		byID[b.Id] = func(r *cgroupRef) {
			r.name, r.sandbox, r.image = b.Id, true, sandboxImage
			r.pod, r.namespace = b.Metadata.GetName(), b.Metadata.GetNamespace()
			r.created = time.Unix(0, b.CreatedAt)
		}
	}
	for _, ct := range ctrs {
		byID[ct.Id] = func(r *cgroupRef) {
			r.name, r.image = ct.Id, imageName(ct.Image)
			r.container = ct.Labels["io.kubernetes.container.name"]
			r.pod, r.namespace = ct.Labels["io.kubernetes.pod.name"], ct.Labels["io.kubernetes.pod.namespace"]
			r.created = time.Unix(0, ct.CreatedAt)
			r.fs = fsByID[ct.Id]
		}
	}
	for _, r := range refs {
		if m := containerIDPattern.FindString(filepath.Base(r.id)); m != "" {
			if set, ok := byID[m]; ok {
				set(r)
			}
		}
	}
	return refs, nil
}

// imageNames returns how to name a container's image as cadvisor does (the
// name the runtime keeps, e.g. docker.io/library/busybox:1.36), where CRI
// gives the image's ID: the tag the kubelet asked for when the runtime says
// (userSpecifiedImage), else the image's first tag, else what CRI gave.
func (c *cadvisorCollector) imageNames(ctx context.Context) func(*runtimeapi.ImageSpec) string {
	tags := map[string][]string{}
	if is := c.p.cfg.Images; is != nil {
		if imgs, err := is.ListImages(ctx, nil); err == nil {
			for _, img := range imgs {
				tags[img.Id] = img.RepoTags
			}
		}
	}
	return func(spec *runtimeapi.ImageSpec) string {
		id := spec.GetImage()
		t := tags[id]
		for _, tag := range t {
			if u := spec.GetUserSpecifiedImage(); u != "" && tag == u {
				return tag
			}
		}
		if len(t) > 0 {
			return t[0]
		}
		if u := spec.GetUserSpecifiedImage(); u != "" {
			return u
		}
		return id
	}
}

// sandboxImage is the runtime's pause image (containerd's CRI config
// "sandboxImage"), the image cadvisor reports for a sandbox; "" when the
// runtime does not say.
func (c *cadvisorCollector) sandboxImage(ctx context.Context) string {
	if p := c.pause.Load(); p != nil {
		return *p
	}
	st, err := c.p.cfg.Runtime.Status(ctx, true)
	if err != nil {
		return ""
	}
	m := sandboxImagePattern.FindStringSubmatch(st.GetInfo()["config"])
	if m == nil {
		return ""
	}
	c.pause.Store(&m[1])
	return m[1]
}

// collectCgroup emits one cgroup's families. What a file does not give (a
// controller not mounted, a cgroup gone meanwhile) is left out. psi: the
// kernel has PSI (psiEnabled).
func (c *cadvisorCollector) collectCgroup(ch chan<- prometheus.Metric, r *cgroupRef, now time.Time, psi bool) {
	cg := c.p.cfg.Machine.Cgroups
	lv := r.values()
	emit := func(d cadvisorDesc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d.desc, d.typ, v, append(append([]string{}, lv...), extra...)...)
	}
	if cg.V2 {
		c.collectV2(emit, cg.Dir("", r.id))
		if psi {
			collectPressure(emit, cg.Dir("", r.id))
		}
	} else {
		c.collectV1(emit, func(ctrl string) string { return cg.Dir(ctrl, r.id) })
	}
	if r.fs != nil {
		device, limit, inodes, free := c.fsDevice(r.fs.GetFsId().GetMountpoint())
		emit(cFsUsage, float64(r.fs.GetUsedBytes().GetValue()), device)
		if limit > 0 {
			emit(cFsLimit, float64(limit), device)
			emit(cFsInodes, float64(inodes), device)
			emit(cFsInodesFree, float64(free), device)
		}
	}
	if r.sandbox || r.root {
		c.collectNetwork(emit, r, cg)
	}
	if !r.created.IsZero() {
		emit(cStartTime, float64(r.created.UnixNano())/1e9)
		emit(cCreationTime, float64(r.created.UnixNano())/1e9)
	}
	if r.name != "" {
		c.collectProcesses(emit, cg.Dir("pids", r.id))
	}
	emit(cLastSeen, float64(now.Unix()))
}

func (c *cadvisorCollector) collectV1(emit func(cadvisorDesc, float64, ...string), dir func(string) string) {
	if v, err := readUint(filepath.Join(dir("cpuacct"), "cpuacct.usage")); err == nil {
		emit(cCPUUsage, seconds(v), "total")
	}
	if st, err := readKeyValues(filepath.Join(dir("cpuacct"), "cpuacct.stat")); err == nil {
		// USER_HZ ticks (100 a second on Linux).
		emit(cCPUUser, float64(st["user"])/100)
		emit(cCPUSystem, float64(st["system"])/100)
	}
	quota, qerr := readInt(filepath.Join(dir("cpu"), "cpu.cfs_quota_us"))
	if st, err := readKeyValues(filepath.Join(dir("cpu"), "cpu.stat")); err == nil && qerr == nil && quota > 0 {
		// cadvisor reports throttling for containers with a quota only.
		emit(cCFSPeriods, float64(st["nr_periods"]))
		emit(cCFSThrottled, float64(st["nr_throttled"]))
		emit(cCFSThrottledSec, seconds(st["throttled_time"]))
		if n, ok := st["nr_bursts"]; ok {
			emit(cCFSBurstPeriods, float64(n))
			emit(cCFSBurstSeconds, seconds(st["burst_time"]))
		}
	}
	if v, err := readUint(filepath.Join(dir("cpu"), "cpu.shares")); err == nil {
		emit(cSpecCPUShares, float64(v))
	}
	if v, err := readUint(filepath.Join(dir("cpu"), "cpu.cfs_period_us")); err == nil {
		emit(cSpecCPUPeriod, float64(v))
	}
	if qerr == nil && quota > 0 {
		emit(cSpecCPUQuota, float64(quota))
	}

	mem := dir("memory")
	if usage, err := readUint(filepath.Join(mem, "memory.usage_in_bytes")); err == nil {
		st, _ := readKeyValues(filepath.Join(mem, "memory.stat"))
		emit(cMemUsage, float64(usage))
		emit(cMemWorkingSet, float64(workingSet(usage, st["total_inactive_file"])))
		emit(cMemRSS, float64(st["total_rss"]))
		emit(cMemCache, float64(st["total_cache"]))
		emit(cMemMapped, float64(st["total_mapped_file"]))
		emit(cMemSwap, float64(st["total_swap"]))
		emit(cMemFailures, float64(st["pgfault"]), "pgfault", "container")
		emit(cMemFailures, float64(st["pgmajfault"]), "pgmajfault", "container")
		emit(cMemFailures, float64(st["total_pgfault"]), "pgfault", "hierarchy")
		emit(cMemFailures, float64(st["total_pgmajfault"]), "pgmajfault", "hierarchy")
		emit(cMemActiveFile, float64(st["total_active_file"]))
		emit(cMemInactiveFile, float64(st["total_inactive_file"]))
		emit(cMemDirty, float64(st["total_dirty"]))
		emit(cMemWriteback, float64(st["total_writeback"]))
		if v, ok := st["total_workingset_refault_anon"]; ok {
			emit(cMemRefaultAnon, float64(v))
			emit(cMemRefaultFile, float64(st["total_workingset_refault_file"]))
		}
	}
	if v, err := readUint(filepath.Join(mem, "memory.kmem.usage_in_bytes")); err == nil {
		emit(cMemKernel, float64(v))
	}
	if v, err := readUint(filepath.Join(mem, "memory.max_usage_in_bytes")); err == nil {
		emit(cMemMaxUsage, float64(v))
	}
	if v, err := readUint(filepath.Join(mem, "memory.failcnt")); err == nil {
		emit(cMemFailcnt, float64(v))
	}
	if st, err := readKeyValues(filepath.Join(mem, "memory.oom_control")); err == nil {
		emit(cOOMEvents, float64(st["oom_kill"]))
	}
	for file, d := range map[string]cadvisorDesc{"memory.limit_in_bytes": cSpecMemLimit, "memory.soft_limit_in_bytes": cSpecMemReserve, "memory.memsw.limit_in_bytes": cSpecMemSwap} {
		if v, err := readUint(filepath.Join(mem, file)); err == nil {
			emit(d, specMemory(v))
		}
	}

	blk := dir("blkio")
	for file, descs := range map[string][2]cadvisorDesc{
		"blkio.throttle.io_service_bytes": {cFsReadBytes, cFsWriteBytes},
		"blkio.throttle.io_serviced":      {cFsReads, cFsWrites},
	} {
		// The _recursive file where the kernel has it: a parent's I/O
		// includes its children's, as cadvisor reports it.
		rw, err := readBlkio(filepath.Join(blk, file+"_recursive"))
		if err != nil {
			rw, err = readBlkio(filepath.Join(blk, file))
		}
		if err != nil {
			continue
		}
		for _, dev := range sortedKeys(rw) {
			name := c.blockDevice(dev)
			emit(descs[0], float64(rw[dev][0]), name)
			emit(descs[1], float64(rw[dev][1]), name)
			if file == "blkio.throttle.io_service_bytes" {
				major, minor, _ := strings.Cut(dev, ":")
				emit(cBlkioDevice, float64(rw[dev][0]), name, major, minor, "Read")
				emit(cBlkioDevice, float64(rw[dev][1]), name, major, minor, "Write")
			}
		}
	}

	pids := dir("pids")
	if procs, err := countLines(filepath.Join(pids, "cgroup.procs")); err == nil {
		emit(cProcesses, float64(procs))
	}
	if v, err := readUint(filepath.Join(pids, "pids.current")); err == nil {
		emit(cThreads, float64(v))
	}
	if v, err := readPidsMax(filepath.Join(pids, "pids.max")); err == nil {
		emit(cThreadsMax, float64(v))
	}
}

func (c *cadvisorCollector) collectV2(emit func(cadvisorDesc, float64, ...string), dir string) {
	if st, err := readKeyValues(filepath.Join(dir, "cpu.stat")); err == nil {
		emit(cCPUUsage, float64(st["usage_usec"])/1e6, "total")
		emit(cCPUUser, float64(st["user_usec"])/1e6)
		emit(cCPUSystem, float64(st["system_usec"])/1e6)
		if quota, period, ok := readCPUMax(filepath.Join(dir, "cpu.max")); ok {
			emit(cSpecCPUPeriod, float64(period))
			if quota > 0 {
				emit(cSpecCPUQuota, float64(quota))
				emit(cCFSPeriods, float64(st["nr_periods"]))
				emit(cCFSThrottled, float64(st["nr_throttled"]))
				emit(cCFSThrottledSec, float64(st["throttled_usec"])/1e6)
				if n, ok := st["nr_bursts"]; ok {
					emit(cCFSBurstPeriods, float64(n))
					emit(cCFSBurstSeconds, float64(st["burst_usec"])/1e6)
				}
			}
		}
	}
	if w, err := readUint(filepath.Join(dir, "cpu.weight")); err == nil {
		// cadvisor's conversion of a weight back to shares.
		emit(cSpecCPUShares, float64(2+((w-1)*262142)/9999))
	}
	if usage, err := readUint(filepath.Join(dir, "memory.current")); err == nil {
		st, _ := readKeyValues(filepath.Join(dir, "memory.stat"))
		emit(cMemUsage, float64(usage))
		emit(cMemWorkingSet, float64(workingSet(usage, st["inactive_file"])))
		emit(cMemRSS, float64(st["anon"]))
		emit(cMemCache, float64(st["file"]))
		emit(cMemMapped, float64(st["file_mapped"]))
		for _, scope := range []string{"container", "hierarchy"} {
			emit(cMemFailures, float64(st["pgfault"]), "pgfault", scope)
			emit(cMemFailures, float64(st["pgmajfault"]), "pgmajfault", scope)
		}
		emit(cMemActiveFile, float64(st["active_file"]))
		emit(cMemInactiveFile, float64(st["inactive_file"]))
		emit(cMemDirty, float64(st["file_dirty"]))
		emit(cMemWriteback, float64(st["file_writeback"]))
		emit(cMemRefaultAnon, float64(st["workingset_refault_anon"]))
		emit(cMemRefaultFile, float64(st["workingset_refault_file"]))
		emit(cMemKernel, float64(st["kernel"]))
		emit(cMemPgscan, float64(st["pgscan"]))
		emit(cMemPgsteal, float64(st["pgsteal"]))
	}
	if v, err := readUint(filepath.Join(dir, "memory.swap.current")); err == nil {
		emit(cMemSwap, float64(v))
	}
	if v, err := readUint(filepath.Join(dir, "memory.peak")); err == nil {
		emit(cMemMaxUsage, float64(v))
	}
	if ev, err := readKeyValues(filepath.Join(dir, "memory.events")); err == nil {
		emit(cOOMEvents, float64(ev["oom_kill"]))
		emit(cMemFailcnt, float64(ev["max"]))
		emit(cMemEventsHigh, float64(ev["high"]))
		emit(cMemEventsMax, float64(ev["max"]))
	}
	for file, d := range map[string]cadvisorDesc{"memory.max": cSpecMemLimit, "memory.low": cSpecMemReserve, "memory.swap.max": cSpecMemSwap} {
		if v, err := readMax(filepath.Join(dir, file)); err == nil {
			emit(d, specMemory(v))
		}
	}
	if io, err := readIOStat(filepath.Join(dir, "io.stat")); err == nil {
		for _, dev := range sortedKeys(io) {
			name := c.blockDevice(dev)
			major, minor, _ := strings.Cut(dev, ":")
			emit(cBlkioDevice, float64(io[dev]["rbytes"]), name, major, minor, "Read")
			emit(cBlkioDevice, float64(io[dev]["wbytes"]), name, major, minor, "Write")
			emit(cFsReadBytes, float64(io[dev]["rbytes"]), name)
			emit(cFsWriteBytes, float64(io[dev]["wbytes"]), name)
			emit(cFsReads, float64(io[dev]["rios"]), name)
			emit(cFsWrites, float64(io[dev]["wios"]), name)
		}
	}
	if procs, err := countLines(filepath.Join(dir, "cgroup.procs")); err == nil {
		emit(cProcesses, float64(procs))
	}
	if v, err := readUint(filepath.Join(dir, "pids.current")); err == nil {
		emit(cThreads, float64(v))
	}
	if v, err := readPidsMax(filepath.Join(dir, "pids.max")); err == nil {
		emit(cThreadsMax, float64(v))
	}
}

// collectPressure reports a v2 cgroup's PSI totals as cadvisor does: the
// kernel's microseconds in seconds, "full" as stalled and "some" as
// waiting (cpu.pressure's "full" is 0 before Linux 5.13).
func collectPressure(emit func(cadvisorDesc, float64, ...string), dir string) {
	for _, f := range pressureFiles {
		p, err := readPSI(filepath.Join(dir, f.file))
		if err != nil || p == nil {
			continue
		}
		emit(f.stalled, float64(p.Full.Total)/1e6)
		emit(f.waiting, float64(p.Some.Total)/1e6)
	}
}

// collectProcesses reports a sandbox's or container's open file
// descriptors and sockets (over its processes) and its first process's
// soft open-files limit, as cadvisor's process metrics.
func (c *cadvisorCollector) collectProcesses(emit func(cadvisorDesc, float64, ...string), dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	fds, sockets, first := 0, 0, ""
	for pid := range strings.FieldsSeq(string(b)) {
		if first == "" {
			first = pid
		}
		fdDir := filepath.Join(c.p.cfg.ProcRoot, pid, "fd")
		entries, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		fds += len(entries)
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
				sockets++
			}
		}
	}
	emit(cFDs, float64(fds))
	emit(cSockets, float64(sockets))
	if first == "" {
		return
	}
	if lim, err := os.ReadFile(filepath.Join(c.p.cfg.ProcRoot, first, "limits")); err == nil {
		for line := range strings.Lines(string(lim)) {
			if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
				if f := strings.Fields(rest); len(f) >= 1 {
					soft := -1.0
					if f[0] != "unlimited" {
						if v, err := strconv.ParseFloat(f[0], 64); err == nil {
							soft = v
						}
					}
					emit(cUlimits, soft, "max_open_files")
				}
			}
		}
	}
}

// collectNetwork reports the interfaces of the cgroup's network namespace:
// the host's for "/", the pod's (through a process of its sandbox) for a
// sandbox, leaving out loopback and veth ends as cadvisor does.
func (c *cadvisorCollector) collectNetwork(emit func(cadvisorDesc, float64, ...string), r *cgroupRef, cg interface{ Dir(string, string) string }) {
	path := filepath.Join(c.p.cfg.ProcRoot, "net", "dev")
	if !r.root {
		pid, err := firstPid(filepath.Join(cg.Dir("memory", r.id), "cgroup.procs"))
		if err != nil {
			return
		}
		path = filepath.Join(c.p.cfg.ProcRoot, strconv.Itoa(pid), "net", "dev")
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	ifaces, err := parseNetDevFull(f)
	if err != nil {
		return
	}
	for _, i := range ifaces {
		if ignoredInterface(i.name) {
			continue
		}
		emit(cNetRxBytes, float64(i.v[0]), i.name)
		emit(cNetRxPackets, float64(i.v[1]), i.name)
		emit(cNetRxErrors, float64(i.v[2]), i.name)
		emit(cNetRxDropped, float64(i.v[3]), i.name)
		emit(cNetTxBytes, float64(i.v[8]), i.name)
		emit(cNetTxPackets, float64(i.v[9]), i.name)
		emit(cNetTxErrors, float64(i.v[10]), i.name)
		emit(cNetTxDropped, float64(i.v[11]), i.name)
	}
}

type netDevLine struct {
	name string
	v    [16]uint64
}

// parseNetDevFull parses every column of /proc/net/dev.
func parseNetDevFull(f io.Reader) ([]netDevLine, error) {
	var out []netDevLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 16 {
			return nil, fmt.Errorf("malformed /proc/net/dev line %q", sc.Text())
		}
		l := netDevLine{name: strings.TrimSpace(name)}
		for i := range l.v {
			n, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("malformed /proc/net/dev line %q: %w", sc.Text(), err)
			}
			l.v[i] = n
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// fsDevice is the device (as cadvisor names it: the mount's source) of the
// filesystem at mountpoint, with its size and inodes.
func (c *cadvisorCollector) fsDevice(mountpoint string) (device string, size, inodes, free uint64) {
	if mountpoint == "" {
		return "", 0, 0, 0
	}
	device = mountpoint
	if src, err := fsutil.MountSource(mountpoint); err == nil && src != "" {
		device = src
	}
	info, err := statfs(mountpoint)
	if err != nil {
		return device, 0, 0, 0
	}
	return device, info.capacity, info.inodes, info.inodesFree
}

// blockDevice names a "major:minor" device as cadvisor does: /dev/<name>.
func (c *cadvisorCollector) blockDevice(majMin string) string {
	b, err := os.ReadFile(filepath.Join(c.sys, "dev", "block", majMin, "uevent"))
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "DEVNAME="); ok {
				return "/dev/" + v
			}
		}
	}
	return majMin
}

// specMemory is a limit as cadvisor reports it: 0 for "no limit" (any value
// above 2^62, the kernel's page-rounded maximum included).
func specMemory(v uint64) float64 {
	if v > 1<<62 {
		return 0
	}
	return float64(v)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readMax reads a v2 limit file: a number, or "max" (math.MaxUint64).
func readMax(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return math.MaxUint64, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// readPidsMax reads pids.max: "max" is 0 (cadvisor's "infinity").
func readPidsMax(path string) (uint64, error) {
	v, err := readMax(path)
	if v == math.MaxUint64 {
		return 0, err
	}
	return v, err
}

// readCPUMax reads v2 cpu.max ("max 100000" or "50000 100000"); quota -1: none.
func readCPUMax(path string) (quota int64, period uint64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	period, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if f[0] == "max" {
		return -1, period, true
	}
	quota, err = strconv.ParseInt(f[0], 10, 64)
	return quota, period, err == nil
}

// readBlkio reads a v1 blkio file ("8:0 Read 4096" lines) into reads and
// writes per device.
func readBlkio(path string) (map[string][2]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][2]uint64{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		v, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			continue
		}
		rw := out[f[0]]
		switch f[1] {
		case "Read":
			rw[0] = v
		case "Write":
			rw[1] = v
		default:
			continue
		}
		out[f[0]] = rw
	}
	return out, nil
}

// readIOStat reads v2 io.stat ("8:0 rbytes=1 wbytes=2 rios=3 wios=4 ...").
func readIOStat(path string) (map[string]map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kv := map[string]uint64{}
		for _, p := range f[1:] {
			if k, v, ok := strings.Cut(p, "="); ok {
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					kv[k] = n
				}
			}
		}
		out[f[0]] = kv
	}
	return out, nil
}

func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

func firstPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
