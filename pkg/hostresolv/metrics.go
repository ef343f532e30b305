package hostresolv

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	reloads    *prometheus.CounterVec
	errors     *prometheus.CounterVec
	generation prometheus.Gauge
	healthy    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_hostresolv_reloads_total",
			Help: "Reads of the node resolver file by result: ok (a new config), unchanged, error."}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_hostresolv_errors_total",
			Help: "Problems with the node resolver file (file) or the file watch (watch)."}, []string{"kind"}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dnsconfigurer_hostresolv_generation",
			Help: "Generation of the latest published snapshot."}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dnsconfigurer_hostresolv_file_healthy",
			Help: "1 when the node resolver file is good, 0 while a problem is reported."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.reloads, m.errors, m.generation, m.healthy} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
