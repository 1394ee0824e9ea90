package credentialprovider

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's credential provider metrics, same names, labels,
// buckets and help (with component-base's "[ALPHA] " prefix).
type metrics struct {
	errors     *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	configInfo *prometheus.GaugeVec
}

func newMetrics() *metrics {
	return &metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "credential_provider_plugin_errors_total",
			Help: "[ALPHA] Number of errors from credential provider plugin",
		}, []string{"plugin_name"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "credential_provider_plugin_duration",
			Help:    "[ALPHA] Duration of execution in seconds for credential provider plugin",
			Buckets: prometheus.DefBuckets,
		}, []string{"plugin_name"}),
		configInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "credential_provider_config_info",
			Help: "[ALPHA] Information about the last applied credential provider configuration with hash as label",
		}, []string{"hash"}),
	}
}

// register adds the metrics to reg (none when nil) and records the
// config's hash, as upstream does once the config is valid.
func (m *metrics) register(reg prometheus.Registerer, configHash string) {
	m.configInfo.WithLabelValues(configHash).Set(1)
	if reg != nil {
		reg.MustRegister(m.errors, m.duration, m.configInfo)
	}
}
