package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// upstreamMetrics is what upstream kubelet v1.37.2 exposes for the metrics
// nodelet defines here: the type, the label names (sorted) and the HELP
// text, with component-base's stability prefix.
var upstreamMetrics = []struct {
	reg    *prometheus.Registry
	name   string
	typ    dto.MetricType
	labels []string
	help   string
}{
	{Kubelet, "kubelet_node_name", dto.MetricType_GAUGE, []string{"node"},
		"[ALPHA] The node's name. The count is always 1."},
	{Kubelet, "kubelet_cri_losing_support", dto.MetricType_GAUGE, []string{"version"},
		"[ALPHA] the Kubernetes version that the currently running CRI implementation will lose support on if not upgraded."},
	{Kubelet, "kubelet_pod_start_duration_seconds", dto.MetricType_HISTOGRAM, nil,
		"[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run"},
	{Kubelet, "kubelet_pod_worker_duration_seconds", dto.MetricType_HISTOGRAM, []string{"operation_type"},
		"[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync"},
	{Kubelet, "kubelet_started_pods_total", dto.MetricType_COUNTER, nil,
		"[ALPHA] Cumulative number of pods started"},
	{Kubelet, "kubelet_started_user_namespaced_pods_total", dto.MetricType_COUNTER, nil,
		"[ALPHA] Cumulative number of pods with user namespaces started. This metric will only be collected on Linux."},
	{Kubelet, "kubelet_started_user_namespaced_pods_errors_total", dto.MetricType_COUNTER, nil,
		"[ALPHA] Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux."},
	{Kubelet, "kubelet_image_volume_requested_total", dto.MetricType_COUNTER, nil,
		"[BETA] Number of requested image volumes."},
	{Kubelet, "kubelet_image_volume_mounted_succeed_total", dto.MetricType_COUNTER, nil,
		"[BETA] Number of successful image volume mounts."},
	{Kubelet, "kubelet_image_volume_mounted_errors_total", dto.MetricType_COUNTER, nil,
		"[BETA] Number of failed image volume mounts."},
	{Kubelet, "kubelet_container_requested_resizes_total", dto.MetricType_COUNTER, []string{"operation", "requirement", "resource"},
		"[ALPHA] Number of requested resizes, counted at the container level. Different resources on the same container are counted separately. The 'requirement' label refers to 'memory' or 'limits'; the 'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'."},
	{Kubelet, "kubelet_pod_resize_duration_milliseconds", dto.MetricType_HISTOGRAM, []string{"success"},
		"[ALPHA] Duration in milliseconds to actuate a pod resize"},
	{Kubelet, "kubelet_pod_pending_resizes", dto.MetricType_GAUGE, []string{"priority_bucket", "reason"},
		"[ALPHA] Number of pending resizes for pods. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). Label 'reason' describes the state (deferred, infeasible)."},
	{Kubelet, "kubelet_pod_infeasible_resizes_total", dto.MetricType_COUNTER, []string{"reason_detail"},
		"[ALPHA] Number of infeasible resizes for pods."},
	{Kubelet, "kubelet_pod_in_progress_resizes", dto.MetricType_GAUGE, nil,
		"[ALPHA] Number of in-progress resizes for pods."},
	{Kubelet, "kubelet_pod_deferred_accepted_resizes_total", dto.MetricType_COUNTER, []string{"retry_trigger"},
		"[ALPHA] Cumulative number of resizes that were accepted after being deferred."},
	{Kubelet, "kubelet_pod_deferred_resize_duration_seconds", dto.MetricType_HISTOGRAM, []string{"priority_bucket", "resolution"},
		"[ALPHA] Duration in seconds that a pod resize remains deferred before completion. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). Label 'resolution' describes how the deferred resize was resolved (accepted, reverted, terminated)."},
	{Kubelet, "kubelet_started_containers_total", dto.MetricType_COUNTER, []string{"container_type"},
		"[ALPHA] Cumulative number of containers started"},
	{Kubelet, "kubelet_runtime_operations_total", dto.MetricType_COUNTER, []string{"operation_type"},
		"[ALPHA] Cumulative number of runtime operations by operation type."},
	{Kubelet, "kubelet_runtime_operations_duration_seconds", dto.MetricType_HISTOGRAM, []string{"operation_type"},
		"[ALPHA] Duration in seconds of runtime operations. Broken down by operation type."},
	{Kubelet, "kubelet_runtime_operations_errors_total", dto.MetricType_COUNTER, []string{"operation_type"},
		"[ALPHA] Cumulative number of runtime operation errors by operation type."},
	{Kubelet, "kubelet_pleg_relist_duration_seconds", dto.MetricType_HISTOGRAM, nil,
		"[ALPHA] Duration in seconds for relisting pods in PLEG."},
	{Kubelet, "kubelet_pleg_relist_interval_seconds", dto.MetricType_HISTOGRAM, nil,
		"[ALPHA] Interval in seconds between relisting in PLEG."},
	{Kubelet, "kubelet_pleg_last_seen_seconds", dto.MetricType_GAUGE, nil,
		"[ALPHA] Timestamp in seconds when PLEG was last seen active."},
	{Kubelet, "kubelet_graceful_shutdown_start_time_seconds", dto.MetricType_GAUGE, nil,
		"[ALPHA] Last graceful shutdown start time since unix epoch in seconds"},
	{Kubelet, "kubelet_graceful_shutdown_end_time_seconds", dto.MetricType_GAUGE, nil,
		"[ALPHA] Last graceful shutdown end time since unix epoch in seconds"},
	{Kubelet, "kubelet_evictions", dto.MetricType_COUNTER, []string{"eviction_signal"},
		"[ALPHA] Cumulative number of pod evictions by eviction signal"},
	{Kubelet, "kubelet_preemptions", dto.MetricType_COUNTER, []string{"preemption_signal"},
		"[ALPHA] Cumulative number of pod preemptions by preemption resource"},
	{Kubelet, "kubelet_eviction_stats_age_seconds", dto.MetricType_HISTOGRAM, []string{"eviction_signal"},
		"[ALPHA] Time between when stats are collected, and when pod is evicted based on those stats by eviction signal"},
	{Kubelet, "kubelet_image_garbage_collected_total", dto.MetricType_COUNTER, []string{"reason"},
		"[ALPHA] Total number of images garbage collected by the kubelet, whether through disk usage or image age."},
	{Kubelet, "kubelet_http_requests_total", dto.MetricType_COUNTER, []string{"long_running", "method", "path", "server_type"},
		"[ALPHA] Number of the http requests received since the server started"},
	{Kubelet, "kubelet_http_inflight_requests", dto.MetricType_GAUGE, []string{"long_running", "method", "path", "server_type"},
		"[ALPHA] Number of the inflight http requests"},
	{Kubelet, "kubelet_running_pods", dto.MetricType_GAUGE, nil,
		"[ALPHA] Number of pods that have a running pod sandbox"},
	{Kubelet, "kubelet_running_containers", dto.MetricType_GAUGE, []string{"container_state"},
		"[ALPHA] Number of containers currently running"},
	{Probes, "prober_probe_total", dto.MetricType_COUNTER, []string{"container", "namespace", "pod", "pod_uid", "probe_type", "result"},
		"[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result."},
	{Probes, "prober_probe_duration_seconds", dto.MetricType_HISTOGRAM, []string{"container", "namespace", "pod", "probe_type"},
		"[ALPHA] Duration in seconds for a probe response."},
}

// withEverySeries gives every vector one series, so that the registries
// expose every family; the series go when the test ends.
func withEverySeries(t *testing.T) {
	const v = "help-test"
	type vec interface{ DeleteLabelValues(...string) bool }
	add := func(x vec, lvs ...string) {
		t.Cleanup(func() { x.DeleteLabelValues(lvs...) })
	}
	NodeName.WithLabelValues(v)
	add(NodeName, v)
	CRILosingSupport.WithLabelValues(v)
	add(CRILosingSupport, v)
	for _, x := range []*prometheus.HistogramVec{PodWorkerDuration, RuntimeOperationsDuration, EvictionStatsAge, PodResizeDurationMilliseconds} {
		x.WithLabelValues(v)
		add(x, v)
	}
	PodDeferredResizeDurationSeconds.WithLabelValues(v, v)
	add(PodDeferredResizeDurationSeconds, v, v)
	PodPendingResizes.WithLabelValues(v, v)
	add(PodPendingResizes, v, v)
	ContainerRequestedResizes.WithLabelValues(v, v, v)
	add(ContainerRequestedResizes, v, v, v)
	for _, x := range []*prometheus.CounterVec{PodInfeasibleResizes, PodDeferredAcceptedResizes} {
		x.WithLabelValues(v)
		add(x, v)
	}
	for _, x := range []*prometheus.CounterVec{StartedContainers, RuntimeOperations, RuntimeOperationsErrors, Evictions, Preemptions, ImageGarbageCollected} {
		x.WithLabelValues(v)
		add(x, v)
	}
	HTTPRequests.WithLabelValues(v, v, v, v)
	add(HTTPRequests, v, v, v, v)
	HTTPInflight.WithLabelValues(v, v, v, v)
	add(HTTPInflight, v, v, v, v)
	ProbeTotal.WithLabelValues(v, v, v, v, v, v)
	add(ProbeTotal, v, v, v, v, v, v)
	ProbeDuration.WithLabelValues(v, v, v, v)
	add(ProbeDuration, v, v, v, v)
	SetRunning(func() (int, map[string]int) { return 0, map[string]int{"running": 0} })
}

func TestHelpMatchesUpstream(t *testing.T) {
	withEverySeries(t)
	type family struct {
		reg *prometheus.Registry
		mf  *dto.MetricFamily
	}
	gathered := map[string]family{}
	for _, reg := range []*prometheus.Registry{Kubelet, Probes} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			gathered[mf.GetName()] = family{reg, mf}
		}
	}
	checked := map[string]bool{}
	for _, want := range upstreamMetrics {
		checked[want.name] = true
		got, ok := gathered[want.name]
		if !ok || got.reg != want.reg {
			t.Errorf("%s: not in its registry", want.name)
			continue
		}
		if got.mf.GetHelp() != want.help {
			t.Errorf("%s HELP:\n got %q\nwant %q", want.name, got.mf.GetHelp(), want.help)
		}
		if got.mf.GetType() != want.typ {
			t.Errorf("%s TYPE %v, want %v", want.name, got.mf.GetType(), want.typ)
		}
		var labels []string
		for _, lp := range got.mf.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		if !slices.Equal(labels, want.labels) {
			t.Errorf("%s labels %q, want %q", want.name, labels, want.labels)
		}
	}
	// Every kubelet_* and prober_* family is in the table.
	for name := range gathered {
		if (strings.HasPrefix(name, "kubelet_") || strings.HasPrefix(name, "prober_")) && !checked[name] {
			t.Errorf("%s: not in upstreamMetrics", name)
		}
	}
}
