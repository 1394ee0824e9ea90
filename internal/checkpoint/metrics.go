package checkpoint

import (
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers the offline state's metrics (nodelet's own:
// upstream has no offline mode) with reg.
func RegisterMetrics(reg prometheus.Registerer, m *Manager) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nodelet_offline_seconds",
			Help: "How long the API server has not answered nodelet, in seconds (0 while it answers).",
		}, func() float64 {
			s := m.State()
			if !s.Down {
				return 0
			}
			return m.cfg.Clock.Since(s.DownSince).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nodelet_checkpoint_restored_pods",
			Help: "Pods run from the offline checkpoint that the API server has not confirmed yet.",
		}, func() float64 { return float64(len(m.State().FromCheckpoint)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nodelet_checkpoint_pods",
			Help: "Pods whose entry the offline checkpoint keeps.",
		}, func() float64 { return float64(m.entries.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nodelet_checkpoint_corrupt_entries",
			Help: "Checkpoint entries that could not be read at start (corrupt, partial or of another version) and were skipped.",
		}, func() float64 { return float64(m.corrupt.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nodelet_checkpoint_write_errors_total",
			Help: "Checkpoint entries that could not be written (over their bounds, or a write error).",
		}, func() float64 { return float64(m.saveErrors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nodelet_checkpoint_served_objects_total",
			Help: "API objects (ConfigMaps, Secrets, tokens, CSI objects) served from the checkpoint because the API server did not answer.",
		}, func() float64 { return float64(m.served.Load()) }),
	)
}
