package podresources

import "github.com/prometheus/client_golang/prometheus"

// metrics are upstream's kubelet_pod_resources_endpoint_* counters, by
// server_api_version.
type metrics struct {
	requests, list, get, getAllocatable, getErrors *prometheus.CounterVec
}

func newMetrics() *metrics {
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: name, Help: "[ALPHA] " + help}, []string{"server_api_version"})
	}
	return &metrics{
		requests:       c("pod_resources_endpoint_requests_total", "Cumulative number of requests to the PodResource endpoint. Broken down by server api version."),
		list:           c("pod_resources_endpoint_requests_list", "Number of requests to the PodResource List endpoint. Broken down by server api version."),
		get:            c("pod_resources_endpoint_requests_get", "Number of requests to the PodResource Get endpoint. Broken down by server api version."),
		getAllocatable: c("pod_resources_endpoint_requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version."),
		getErrors:      c("pod_resources_endpoint_errors_get", "Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version."),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.list, m.get, m.getAllocatable, m.getErrors} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
