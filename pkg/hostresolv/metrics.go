package hostresolv

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
)

type metrics struct {
	reloads    *prometheus.CounterVec
	errors     *prometheus.CounterVec
	generation prometheus.Gauge
	healthy    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	return prom.New(reg, "hostresolv", func(s *prom.Set) *metrics {
		return &metrics{
			reloads: s.CounterVec("reloads_total",
				"Reads of the node resolver file by result: ok (a new config), unchanged, error.", "result"),
			errors: s.CounterVec("errors_total",
				"Problems with the node resolver file (file) or the file watch (watch).", "kind"),
			generation: s.Gauge("generation", "Generation of the latest published snapshot."),
			healthy: s.Gauge("file_healthy",
				"1 when the node resolver file is good, 0 while a problem is reported."),
		}
	})
}
