package metrics

import "github.com/prometheus/client_golang/prometheus"

// Probes is the registry served at /metrics/probes.
var Probes = prometheus.NewRegistry()

var (
	// ProbeTotal counts probe runs by kind and result, as upstream's
	// prober_probe_total.
	ProbeTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "prober",
		Name:      "probe_total",
		Help:      "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})

	// ProbeDuration is upstream's prober_probe_duration_seconds. As
	// upstream, only successful probes are observed.
	ProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "prober",
		Name:      "probe_duration_seconds",
		Help:      "[ALPHA] Duration in seconds for a probe response.",
		Buckets:   prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})
)

func init() {
	Probes.MustRegister(ProbeTotal, ProbeDuration)
}
