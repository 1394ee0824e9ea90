package csi

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsTimeout bounds NodeGetVolumeStats: a hung driver delays a summary by
// this much at most.
const statsTimeout = 10 * time.Second

// Usage is a volume's usage as its driver reports it (NodeGetVolumeStats);
// a nil field is unknown.
type Usage struct {
	Time                           time.Time
	Capacity, Available, Used      *uint64
	Inodes, InodesFree, InodesUsed *uint64
	Abnormal                       bool
	Namespace, Claim               string // the PVC, "" for inline volumes
}

// VolumeStats measures the pod's CSI volume named name, if this process
// published it and its driver has GET_VOLUME_STATS; a measurement is
// reused for the plugin's StatsPeriod.
func (p *VolumePlugin) VolumeStats(ctx context.Context, uid types.UID, name string) (Usage, bool) {
	key := setKey{uid, name}
	p.mu.Lock()
	s := p.set[key]
	p.mu.Unlock()
	if s == nil || s.spec == nil {
		return Usage{}, false
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	u, fresh := s.usage, s.usage != nil && now.Sub(s.usage.Time) < p.cfg.StatsPeriod
	p.mu.Unlock()
	if fresh {
		return *u, true
	}
	m, ok := p.measure(ctx, s)
	if !ok {
		return Usage{}, false
	}
	m.Time = now
	p.mu.Lock()
	s.usage = &m
	p.mu.Unlock()
	return m, true
}

func (p *VolumePlugin) measure(ctx context.Context, s *setUp) (Usage, bool) {
	drv, ok := p.cfg.Drivers.Get(s.spec.Driver)
	if !ok {
		return Usage{}, false
	}
	conn, err := p.conn(drv.Endpoint)
	if err != nil {
		return Usage{}, false
	}
	node := csipb.NewNodeClient(conn)
	caps, err := p.nodeCaps(ctx, node)
	if err != nil || !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return Usage{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	resp, err := node.NodeGetVolumeStats(cctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: s.spec.Handle, VolumePath: s.target})
	if err != nil {
		return Usage{}, false
	}
	return UsageOf(resp, s.claimNS, s.claim), true
}

// UsageOf reads a NodeGetVolumeStats response, as upstream's
// csiMetricsProvider (unset figures stay unknown).
func UsageOf(resp *csipb.NodeGetVolumeStatsResponse, ns, claim string) Usage {
	u := Usage{Namespace: ns, Claim: claim}
	val := func(v int64) *uint64 {
		if v < 0 {
			return nil
		}
		x := uint64(v)
		return &x
	}
	for _, e := range resp.GetUsage() {
		switch e.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			u.Capacity, u.Available, u.Used = val(e.GetTotal()), val(e.GetAvailable()), val(e.GetUsed())
		case csipb.VolumeUsage_INODES:
			u.Inodes, u.InodesFree, u.InodesUsed = val(e.GetTotal()), val(e.GetAvailable()), val(e.GetUsed())
		}
	}
	return u
}

var (
	labels       = []string{"namespace", "persistentvolumeclaim"}
	descCapacity = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "[ALPHA] Capacity in bytes of the volume", labels, nil)
	descAvail    = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "[ALPHA] Number of available bytes in the volume", labels, nil)
	descUsed     = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "[ALPHA] Number of used bytes in the volume", labels, nil)
	descInodes   = prometheus.NewDesc("kubelet_volume_stats_inodes", "[ALPHA] Maximum number of inodes in the volume", labels, nil)
	descIFree    = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "[ALPHA] Number of free inodes in the volume", labels, nil)
	descIUsed    = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "[ALPHA] Number of used inodes in the volume", labels, nil)
)

var (
	metricsOnce   sync.Once
	metricsPlugin atomic.Pointer[VolumePlugin]
)

// RegisterMetrics makes reg serve the kubelet_volume_stats_* metrics of the
// PVCs p has published, as upstream's volumeStatsCollector (one series per
// PVC; not health_status_abnormal: CSI spec v1.13 has no volume
// condition). Registered once per registry; a later p replaces the earlier.
func RegisterMetrics(reg prometheus.Registerer, p *VolumePlugin) {
	metricsPlugin.Store(p)
	metricsOnce.Do(func() { reg.MustRegister(statsCollector{}) })
}

type statsCollector struct{}

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCapacity, descAvail, descUsed, descInodes, descIFree, descIUsed} {
		ch <- d
	}
}

func (statsCollector) Collect(ch chan<- prometheus.Metric) {
	p := metricsPlugin.Load()
	if p == nil {
		return
	}
	p.mu.Lock()
	var keys []setKey
	for k, s := range p.set {
		if s.claim != "" {
			keys = append(keys, k)
		}
	}
	p.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].uid < keys[j].uid || keys[i].uid == keys[j].uid && keys[i].name < keys[j].name
	})
	seen := map[[2]string]bool{}
	for _, k := range keys {
		u, ok := p.VolumeStats(context.Background(), k.uid, k.name)
		if !ok || seen[[2]string{u.Namespace, u.Claim}] {
			continue
		}
		seen[[2]string{u.Namespace, u.Claim}] = true
		emit := func(d *prometheus.Desc, v *uint64) {
			if v != nil {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*v), u.Namespace, u.Claim)
			}
		}
		emit(descCapacity, u.Capacity)
		emit(descAvail, u.Available)
		emit(descUsed, u.Used)
		emit(descInodes, u.Inodes)
		emit(descIFree, u.InodesFree)
		emit(descIUsed, u.InodesUsed)
	}
}

// claimOf is the PVC of a pod's volume ("" for an inline volume).
func claimOf(pod *v1.Pod, vol *v1.Volume) (string, string) {
	if c := ClaimName(pod, vol); c != "" {
		return pod.Namespace, c
	}
	return "", ""
}

// SummaryStats is the volume's entry in /stats/summary, as upstream: the
// pod's volume name, the PVC's reference for a persistent volume.
func (u Usage) SummaryStats(name string) statsv1alpha1.VolumeStats {
	vs := statsv1alpha1.VolumeStats{Name: name, FsStats: statsv1alpha1.FsStats{Time: metav1.NewTime(u.Time),
		CapacityBytes: u.Capacity, AvailableBytes: u.Available, UsedBytes: u.Used,
		Inodes: u.Inodes, InodesFree: u.InodesFree, InodesUsed: u.InodesUsed}}
	if u.Claim != "" {
		vs.PVCRef = &statsv1alpha1.PVCReference{Name: u.Claim, Namespace: u.Namespace}
	}
	return vs
}

// SummaryStats is a pod's CSI volume in /stats/summary (the stats
// provider's DriverVolume): its driver's usage, false when the volume is
// not a CSI one or its driver reports none.
func (p *VolumePlugin) SummaryStats(ctx context.Context, pod *v1.Pod, v *v1.Volume) (statsv1alpha1.VolumeStats, bool) {
	u, ok := p.VolumeStats(ctx, pod.UID, v.Name)
	if !ok {
		return statsv1alpha1.VolumeStats{}, false
	}
	return u.SummaryStats(v.Name), true
}
