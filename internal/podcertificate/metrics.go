package podcertificate

import "github.com/prometheus/client_golang/prometheus"

// statesDesc is upstream's kubelet_podcertificate_states.
var statesDesc = prometheus.NewDesc("kubelet_podcertificate_states",
	"[ALPHA] Gauge vector reporting the number of pod certificate projected volume sources, faceted by signer_name and state.",
	[]string{"signer_name", "state"}, nil)

// collector reports the manager's sources by signer and state at each
// scrape, as upstream's podCertificateCollector.
type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- statesDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.m.MetricReport().PodCertificateStates {
		ch <- prometheus.MustNewConstMetric(statesDesc, prometheus.GaugeValue, float64(n), k.SignerName, k.State)
	}
}

// RegisterMetrics registers kubelet_podcertificate_states for m with reg
// (nil: none).
func RegisterMetrics(reg prometheus.Registerer, m *Manager) {
	if reg != nil {
		reg.MustRegister(collector{m})
	}
}
