package devicemanager

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's device plugin metrics, same names.
type metrics struct {
	registrations *prometheus.CounterVec
	allocDuration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "device_plugin_registration_total",
			Help: "[ALPHA] Cumulative number of device plugin registrations. Broken down by resource name.",
		}, []string{"resource_name"}),
		allocDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "device_plugin_alloc_duration_seconds",
			Help:    "[ALPHA] Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
			Buckets: prometheus.DefBuckets,
		}, []string{"resource_name"}),
	}
	if reg != nil {
		reg.MustRegister(m.registrations, m.allocDuration)
	}
	return m
}
