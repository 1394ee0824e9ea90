package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The /metrics/resource metrics, named, described and labelled as upstream's
// (pkg/kubelet/metrics/collectors/resource_metrics.go); the help strings
// carry the stability prefix component-base adds.
var (
	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryUsageDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	nodeSwapUsageDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds",
		[]string{"container", "pod", "namespace"}, nil)
	containerMemoryUsageDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes",
		[]string{"container", "pod", "namespace"}, nil)
	containerSwapUsageDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems",
		[]string{"container", "pod", "namespace"}, nil)
	containerSwapLimitDesc = prometheus.NewDesc("container_swap_limit_bytes",
		"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems",
		[]string{"container", "pod", "namespace"}, nil)
	podSwapUsageDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
		[]string{"pod", "namespace"}, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds",
		[]string{"container", "pod", "namespace"}, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
		[]string{"pod", "namespace"}, nil)
	podMemoryUsageDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes",
		[]string{"pod", "namespace"}, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// ResourceCollector returns the collector of the /metrics/resource
// endpoint. Each scrape reads the node's cgroups and the runtime's CPU and
// memory stats (no filesystem walk). A scrape has no context: it logs to
// Config.Logger.
func (p *Provider) ResourceCollector() prometheus.Collector {
	return &resourceCollector{p: p}
}

type resourceCollector struct {
	p *Provider
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodeCPUUsageDesc
	ch <- nodeMemoryUsageDesc
	ch <- nodeSwapUsageDesc
	ch <- containerStartTimeDesc
	ch <- containerCPUUsageDesc
	ch <- containerMemoryUsageDesc
	ch <- podCPUUsageDesc
	ch <- podMemoryUsageDesc
	ch <- containerSwapUsageDesc
	ch <- containerSwapLimitDesc
	ch <- podSwapUsageDesc
	ch <- resourceScrapeErrorDesc
}

// Collect only reports what is active now: no metric outlives its container.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	var scrapeError float64
	defer func() {
		ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, scrapeError)
	}()
	logger := c.p.logger
	s, err := c.p.summary(klog.NewContext(context.Background(), logger), false)
	if err != nil {
		scrapeError = 1
		logger.Error(err, "Error getting summary for resourceMetric prometheus endpoint")
		return
	}
	collectMetrics(ch, s)
}

func collectMetrics(ch chan<- prometheus.Metric, s *statsv1alpha1.Summary) {
	emit := func(t time.Time, d *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		m := prometheus.MustNewConstMetric(d, typ, v, labels...)
		if !t.IsZero() {
			m = prometheus.NewMetricWithTimestamp(t, m)
		}
		ch <- m
	}
	n := s.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		emit(n.CPU.Time.Time, nodeCPUUsageDesc, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		emit(n.Memory.Time.Time, nodeMemoryUsageDesc, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		// Upstream stamps it with the memory's time.
		t := n.Swap.Time.Time
		if n.Memory != nil {
			t = n.Memory.Time.Time
		}
		emit(t, nodeSwapUsageDesc, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes))
	}

	// Two sandboxes of one pod name (a pod recreated while the old one
	// terminates) would repeat a label set and fail the whole scrape: the
	// first one, the newest, wins.
	type podRef struct{ ns, name string }
	seen := make(map[podRef]bool)
	for _, pod := range s.Pods {
		ref := podRef{pod.PodRef.Namespace, pod.PodRef.Name}
		if seen[ref] {
			continue
		}
		seen[ref] = true
		names := make(map[string]bool)
		for _, c := range pod.Containers {
			if names[c.Name] {
				continue
			}
			names[c.Name] = true
			if c.StartTime.Unix() > 0 {
				emit(time.Time{}, containerStartTimeDesc, prometheus.GaugeValue,
					float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
			}
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				emit(c.CPU.Time.Time, containerCPUUsageDesc, prometheus.CounterValue,
					seconds(*c.CPU.UsageCoreNanoSeconds), c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
			}
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				emit(c.Memory.Time.Time, containerMemoryUsageDesc, prometheus.GaugeValue,
					float64(*c.Memory.WorkingSetBytes), c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
			}
			// As upstream: the limit is the available swap plus the usage.
			if sw := c.Swap; sw != nil {
				usage := float64(0)
				if sw.SwapUsageBytes != nil {
					usage = float64(*sw.SwapUsageBytes)
					emit(sw.Time.Time, containerSwapUsageDesc, prometheus.GaugeValue, usage, c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
				}
				if sw.SwapAvailableBytes != nil {
					emit(sw.Time.Time, containerSwapLimitDesc, prometheus.GaugeValue, float64(*sw.SwapAvailableBytes)+usage, c.Name, pod.PodRef.Name, pod.PodRef.Namespace)
				}
			}
		}
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			emit(pod.CPU.Time.Time, podCPUUsageDesc, prometheus.CounterValue,
				seconds(*pod.CPU.UsageCoreNanoSeconds), pod.PodRef.Name, pod.PodRef.Namespace)
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			emit(pod.Memory.Time.Time, podMemoryUsageDesc, prometheus.GaugeValue,
				float64(*pod.Memory.WorkingSetBytes), pod.PodRef.Name, pod.PodRef.Namespace)
		}
		if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
			emit(pod.Swap.Time.Time, podSwapUsageDesc, prometheus.GaugeValue, float64(*pod.Swap.SwapUsageBytes), pod.PodRef.Name, pod.PodRef.Namespace)
		}
	}
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }
