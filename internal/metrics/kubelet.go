package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Kubelet is the registry served at /metrics: the Go runtime, the process
// and the kubelet_* metrics.
var Kubelet = prometheus.NewRegistry()

var (
	// NodeName is upstream's kubelet_node_name{node}: always 1.
	NodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "node_name",
		Help: "[ALPHA] The node's name. The count is always 1.",
	}, []string{"node"})

	// CRILosingSupport is upstream's kubelet_cri_losing_support{version}:
	// 1 for the Kubernetes version that drops support for the running CRI
	// runtime (one that does not answer RuntimeConfig, such as containerd
	// 1.x: "1.38.0"). Absent when the runtime is supported.
	CRILosingSupport = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "cri_losing_support",
		Help: "[ALPHA] the Kubernetes version that the currently running CRI implementation will lose support on if not upgraded.",
	}, []string{"version"})

	// PodStartDuration is kubelet_pod_start_duration_seconds: from the
	// moment nodelet first sees a pod to the moment all its containers run.
	PodStartDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pod_start_duration_seconds",
		Help:    "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
		Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
	})

	// PodWorkerDuration is kubelet_pod_worker_duration_seconds{operation_type}:
	// one sync of one pod (nodelet's operation types: create or sync).
	PodWorkerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pod_worker_duration_seconds",
		Help:    "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})

	// StartedPods is kubelet_started_pods_total (sandboxes created).
	StartedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "started_pods_total",
		Help: "[ALPHA] Cumulative number of pods started",
	})
	// StartedUserNamespacedPods and StartedUserNamespacedPodsErrors are
	// upstream's kubelet_started_user_namespaced_pods_total and
	// kubelet_started_user_namespaced_pods_errors_total: syncs creating the
	// sandbox of a hostUsers: false pod, and those that failed.
	StartedUserNamespacedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "started_user_namespaced_pods_total",
		Help: "[ALPHA] Cumulative number of pods with user namespaces started. This metric will only be collected on Linux.",
	})
	StartedUserNamespacedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "started_user_namespaced_pods_errors_total",
		Help: "[ALPHA] Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux.",
	})

	// ImageVolumeRequested, ImageVolumeMountedSucceed and
	// ImageVolumeMountedErrors are upstream's kubelet_image_volume_*_total:
	// the image volumes of the containers nodelet tried to start, and
	// whether the runtime mounted them (a create refused with
	// ImageVolumeMountFailed is an error).
	ImageVolumeRequested = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "image_volume_requested_total",
		Help: "[BETA] Number of requested image volumes.",
	})
	ImageVolumeMountedSucceed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "image_volume_mounted_succeed_total",
		Help: "[BETA] Number of successful image volume mounts.",
	})
	ImageVolumeMountedErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "image_volume_mounted_errors_total",
		Help: "[BETA] Number of failed image volume mounts.",
	})
	// The in-place resize metrics, upstream's (allocation, kuberuntime):
	// container resources asked to change by operation, how long actuating
	// a resize took, resizes pending (deferred or infeasible) and in
	// progress, why resizes were infeasible, deferred ones accepted later
	// and how long they waited.
	ContainerRequestedResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "container_requested_resizes_total",
		Help: "[ALPHA] Number of requested resizes, counted at the container level. Different resources on the same container are counted separately. The 'requirement' label refers to 'memory' or 'limits'; the 'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'.",
	}, []string{"resource", "requirement", "operation"})
	PodResizeDurationMilliseconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pod_resize_duration_milliseconds",
		Help:    "[ALPHA] Duration in milliseconds to actuate a pod resize",
		Buckets: []float64{10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000},
	}, []string{"success"})
	PodPendingResizes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "pod_pending_resizes",
		Help: "[ALPHA] Number of pending resizes for pods. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). Label 'reason' describes the state (deferred, infeasible).",
	}, []string{"reason", "priority_bucket"})
	PodInfeasibleResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "pod_infeasible_resizes_total",
		Help: "[ALPHA] Number of infeasible resizes for pods.",
	}, []string{"reason_detail"})
	PodInProgressResizes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "pod_in_progress_resizes",
		Help: "[ALPHA] Number of in-progress resizes for pods.",
	})
	PodDeferredAcceptedResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "pod_deferred_accepted_resizes_total",
		Help: "[ALPHA] Cumulative number of resizes that were accepted after being deferred.",
	}, []string{"retry_trigger"})
	PodDeferredResizeDurationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pod_deferred_resize_duration_seconds",
		Help:    "[ALPHA] Duration in seconds that a pod resize remains deferred before completion. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). Label 'resolution' describes how the deferred resize was resolved (accepted, reverted, terminated).",
		Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 150, 180, 300, 600, 1200, 1800, 3600},
	}, []string{"resolution", "priority_bucket"})
	// StartedContainers is kubelet_started_containers_total{container_type}.
	StartedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "started_containers_total",
		Help: "[ALPHA] Cumulative number of containers started",
	}, []string{"container_type"})

	// RuntimeOperations, RuntimeOperationsDuration and RuntimeOperationsErrors
	// are kubelet_runtime_operations_{total,duration_seconds,errors_total}.
	RuntimeOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "runtime_operations_total",
		Help: "[ALPHA] Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})
	RuntimeOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "runtime_operations_duration_seconds",
		Help:    "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"})
	RuntimeOperationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "runtime_operations_errors_total",
		Help: "[ALPHA] Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})

	// PLEGRelistDuration and PLEGRelistInterval are upstream's
	// kubelet_pleg_relist_{duration,interval}_seconds.
	PLEGRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pleg_relist_duration_seconds",
		Help:    "[ALPHA] Duration in seconds for relisting pods in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	PLEGRelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "pleg_relist_interval_seconds",
		Help:    "[ALPHA] Interval in seconds between relisting in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	// GracefulShutdownStartTime and GracefulShutdownEndTime are
	// kubelet_graceful_shutdown_{start,end}_time_seconds: the last
	// graceful node shutdown's times since the epoch (end 0 while one runs).
	GracefulShutdownStartTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "graceful_shutdown_start_time_seconds",
		Help: "[ALPHA] Last graceful shutdown start time since unix epoch in seconds",
	})
	GracefulShutdownEndTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "graceful_shutdown_end_time_seconds",
		Help: "[ALPHA] Last graceful shutdown end time since unix epoch in seconds",
	})
	// PLEGLastSeen is kubelet_pleg_last_seen_seconds.
	PLEGLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "pleg_last_seen_seconds",
		Help: "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
	})

	// Evictions is kubelet_evictions{eviction_signal}: the pods evicted,
	// by the signal (or local storage limit) that made the node evict.
	Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "evictions",
		Help: "[ALPHA] Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})
	// Preemptions is kubelet_preemptions{preemption_signal}: the pods
	// evicted to admit a critical pod, by the first resource it lacked.
	Preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "preemptions",
		Help: "[ALPHA] Cumulative number of pod preemptions by preemption resource",
	}, []string{"preemption_signal"})
	// EvictionStatsAge is kubelet_eviction_stats_age_seconds{eviction_signal}:
	// how old the stats an eviction was decided on were.
	EvictionStatsAge = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kubelet", Name: "eviction_stats_age_seconds",
		Help:    "[ALPHA] Time between when stats are collected, and when pod is evicted based on those stats by eviction signal",
		Buckets: prometheus.DefBuckets,
	}, []string{"eviction_signal"})

	// ImageGarbageCollected is kubelet_image_garbage_collected_total{reason}:
	// images removed for their age or for space.
	ImageGarbageCollected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "image_garbage_collected_total",
		Help: "[ALPHA] Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
	}, []string{"reason"})

	// HTTPRequests and HTTPInflight describe the kubelet API server, as
	// upstream's kubelet_http_requests_total and kubelet_http_inflight_requests.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kubelet", Name: "http_requests_total",
		Help: "[ALPHA] Number of the http requests received since the server started",
	}, []string{"method", "path", "server_type", "long_running"})
	HTTPInflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kubelet", Name: "http_inflight_requests",
		Help: "[ALPHA] Number of the inflight http requests",
	}, []string{"method", "path", "server_type", "long_running"})
)

// RunningCounts reports what the runtime runs: pods with a ready sandbox
// and containers by state (created, running, exited, unknown).
type RunningCounts func() (pods int, containers map[string]int)

// runningCollector turns the RunningCounts set with SetRunning into
// kubelet_running_pods and kubelet_running_containers{container_state} at
// scrape time.
type runningCollector struct {
	counts     atomic.Pointer[RunningCounts]
	pods, ctrs *prometheus.Desc
}

var running = &runningCollector{
	pods: prometheus.NewDesc("kubelet_running_pods", "[ALPHA] Number of pods that have a running pod sandbox", nil, nil),
	ctrs: prometheus.NewDesc("kubelet_running_containers", "[ALPHA] Number of containers currently running", []string{"container_state"}, nil),
}

func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.pods; ch <- c.ctrs }

func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.counts.Load()
	if f == nil {
		return
	}
	pods, ctrs := (*f)()
	ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(pods))
	for state, n := range ctrs {
		ch <- prometheus.MustNewConstMetric(c.ctrs, prometheus.GaugeValue, float64(n), state)
	}
}

// SetRunning makes kubelet_running_pods and kubelet_running_containers
// come from counts at every scrape.
func SetRunning(counts RunningCounts) { running.counts.Store(&counts) }

// ContainerStateLabel is the container_state label of a CRI state.
func ContainerStateLabel(s runtimeapi.ContainerState) string {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return "created"
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return "running"
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return "exited"
	}
	return "unknown"
}

func init() {
	Kubelet.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		NodeName, CRILosingSupport, PodStartDuration, PodWorkerDuration, StartedPods, StartedContainers,
		StartedUserNamespacedPods, StartedUserNamespacedPodsErrors,
		ImageVolumeRequested, ImageVolumeMountedSucceed, ImageVolumeMountedErrors,
		ContainerRequestedResizes, PodResizeDurationMilliseconds, PodPendingResizes, PodInfeasibleResizes,
		PodInProgressResizes, PodDeferredAcceptedResizes, PodDeferredResizeDurationSeconds,
		RuntimeOperations, RuntimeOperationsDuration, RuntimeOperationsErrors,
		PLEGRelistDuration, PLEGRelistInterval, PLEGLastSeen, HTTPRequests, HTTPInflight, running,
		Evictions, Preemptions, EvictionStatsAge, ImageGarbageCollected,
		GracefulShutdownStartTime, GracefulShutdownEndTime,
	)
}

// observe records one runtime operation.
func observe(op string, start time.Time, err error) {
	RuntimeOperations.WithLabelValues(op).Inc()
	RuntimeOperationsDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		RuntimeOperationsErrors.WithLabelValues(op).Inc()
	}
}

// InstrumentRuntime wraps a CRI runtime service so that every call nodelet
// makes is counted and timed in kubelet_runtime_operations_*, with
// upstream's operation_type names.
func InstrumentRuntime(rs internalapi.RuntimeService) internalapi.RuntimeService {
	return &instrumentedRuntime{rs}
}

// InstrumentImages does the same for the CRI image service.
func InstrumentImages(is internalapi.ImageManagerService) internalapi.ImageManagerService {
	return &instrumentedImages{is}
}

type instrumentedRuntime struct{ internalapi.RuntimeService }

func (r *instrumentedRuntime) Version(ctx context.Context, v string) (*runtimeapi.VersionResponse, error) {
	defer observe("version", time.Now(), nil)
	return r.RuntimeService.Version(quiet(ctx), v)
}

func (r *instrumentedRuntime) Status(ctx context.Context, verbose bool) (out *runtimeapi.StatusResponse, err error) {
	defer func(t time.Time) { observe("status", t, err) }(time.Now())
	return r.RuntimeService.Status(quiet(ctx), verbose)
}

func (r *instrumentedRuntime) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, h string) (id string, err error) {
	defer func(t time.Time) { observe("run_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.RunPodSandbox(quiet(ctx), c, h)
}

func (r *instrumentedRuntime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("stop_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.StopPodSandbox(quiet(ctx), id)
}

func (r *instrumentedRuntime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("remove_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.RemovePodSandbox(quiet(ctx), id)
}

func (r *instrumentedRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (out *runtimeapi.PodSandboxStatusResponse, err error) {
	defer func(t time.Time) { observe("podsandbox_status", t, err) }(time.Now())
	return r.RuntimeService.PodSandboxStatus(quiet(ctx), id, verbose)
}

func (r *instrumentedRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (out []*runtimeapi.PodSandbox, err error) {
	defer func(t time.Time) { observe("list_podsandbox", t, err) }(time.Now())
	return r.RuntimeService.ListPodSandbox(quiet(ctx), f)
}

func (r *instrumentedRuntime) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (id string, err error) {
	defer func(t time.Time) { observe("create_container", t, err) }(time.Now())
	return r.RuntimeService.CreateContainer(quiet(ctx), sb, c, sc)
}

func (r *instrumentedRuntime) StartContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("start_container", t, err) }(time.Now())
	return r.RuntimeService.StartContainer(quiet(ctx), id)
}

func (r *instrumentedRuntime) StopContainer(ctx context.Context, id string, timeout int64) (err error) {
	defer func(t time.Time) { observe("stop_container", t, err) }(time.Now())
	return r.RuntimeService.StopContainer(quiet(ctx), id, timeout)
}

func (r *instrumentedRuntime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("remove_container", t, err) }(time.Now())
	return r.RuntimeService.RemoveContainer(quiet(ctx), id)
}

func (r *instrumentedRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (out []*runtimeapi.Container, err error) {
	defer func(t time.Time) { observe("list_containers", t, err) }(time.Now())
	return r.RuntimeService.ListContainers(quiet(ctx), f)
}

func (r *instrumentedRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (out *runtimeapi.ContainerStatusResponse, err error) {
	defer func(t time.Time) { observe("container_status", t, err) }(time.Now())
	return r.RuntimeService.ContainerStatus(quiet(ctx), id, verbose)
}

func (r *instrumentedRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (o, e []byte, err error) {
	defer func(t time.Time) { observe("exec_sync", t, err) }(time.Now())
	return r.RuntimeService.ExecSync(quiet(ctx), id, cmd, timeout)
}

func (r *instrumentedRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (out *runtimeapi.ExecResponse, err error) {
	defer func(t time.Time) { observe("exec", t, err) }(time.Now())
	return r.RuntimeService.Exec(quiet(ctx), req)
}

func (r *instrumentedRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (out *runtimeapi.AttachResponse, err error) {
	defer func(t time.Time) { observe("attach", t, err) }(time.Now())
	return r.RuntimeService.Attach(quiet(ctx), req)
}

func (r *instrumentedRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (out *runtimeapi.PortForwardResponse, err error) {
	defer func(t time.Time) { observe("port_forward", t, err) }(time.Now())
	return r.RuntimeService.PortForward(quiet(ctx), req)
}

func (r *instrumentedRuntime) ReopenContainerLog(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("reopen_container_log", t, err) }(time.Now())
	return r.RuntimeService.ReopenContainerLog(quiet(ctx), id)
}

func (r *instrumentedRuntime) ListContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) (out []*runtimeapi.ContainerStats, err error) {
	defer func(t time.Time) { observe("list_container_stats", t, err) }(time.Now())
	return r.RuntimeService.ListContainerStats(quiet(ctx), f)
}

func (r *instrumentedRuntime) ListPodSandboxStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) (out []*runtimeapi.PodSandboxStats, err error) {
	defer func(t time.Time) { observe("list_podsandbox_stats", t, err) }(time.Now())
	return r.RuntimeService.ListPodSandboxStats(quiet(ctx), f)
}

type instrumentedImages struct {
	internalapi.ImageManagerService
}

func (r *instrumentedImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (ref string, err error) {
	defer func(t time.Time) { observe("pull_image", t, err) }(time.Now())
	return r.ImageManagerService.PullImage(quiet(ctx), img, auth, sc)
}

func (r *instrumentedImages) ImageStatus(ctx context.Context, img *runtimeapi.ImageSpec, verbose bool) (out *runtimeapi.ImageStatusResponse, err error) {
	defer func(t time.Time) { observe("image_status", t, err) }(time.Now())
	return r.ImageManagerService.ImageStatus(quiet(ctx), img, verbose)
}

func (r *instrumentedImages) ListImages(ctx context.Context, f *runtimeapi.ImageFilter) (out []*runtimeapi.Image, err error) {
	defer func(t time.Time) { observe("list_images", t, err) }(time.Now())
	return r.ImageManagerService.ListImages(quiet(ctx), f)
}

func (r *instrumentedImages) RemoveImage(ctx context.Context, img *runtimeapi.ImageSpec) (err error) {
	defer func(t time.Time) { observe("remove_image", t, err) }(time.Now())
	return r.ImageManagerService.RemoveImage(quiet(ctx), img)
}

func (r *instrumentedImages) ImageFsInfo(ctx context.Context) (out *runtimeapi.ImageFsInfoResponse, err error) {
	defer func(t time.Time) { observe("image_fs_info", t, err) }(time.Now())
	return r.ImageManagerService.ImageFsInfo(quiet(ctx))
}
