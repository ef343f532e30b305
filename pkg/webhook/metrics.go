package webhook

import (
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
)

// metrics are the webhook's Prometheus metrics:
//
//   - dnsconfigurer_webhook_requests_total{path,code}: HTTP requests by path
//     (/validate, /healthz, /metrics, other) and status code
//   - dnsconfigurer_webhook_reviews_total{outcome}: admission decisions:
//     allowed, warned, denied, skipped (not a Pod CREATE)
//   - dnsconfigurer_webhook_violations_total{field,action}: problems found,
//     by field path without indexes and action deny or warn
//   - dnsconfigurer_webhook_review_duration_seconds: time from the request
//     to the response written, for /validate requests that got an
//     AdmissionResponse (histogram)
//   - dnsconfigurer_webhook_cert_reloads_total{result}: certificate loads
//     after a file change: ok or error (the previous pair stays in use)
//   - dnsconfigurer_webhook_cert_not_after_timestamp_seconds: expiry of the
//     certificate being served
//   - dnsconfigurer_webhook_request_bytes_in_flight: request body bytes
//     taken from the in-flight budget (WithMaxInFlightBytes)
type metrics struct {
	requests   *prometheus.CounterVec
	reviews    *prometheus.CounterVec
	violations *prometheus.CounterVec
	duration   prometheus.Histogram
	reloads    *prometheus.CounterVec
	notAfter   prometheus.Gauge
	inFlight   prometheus.GaugeFunc

	outcomes map[Outcome]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, budget *byteBudget) (*metrics, error) {
	return prom.New(reg, "webhook", func(s *prom.Set) *metrics {
		m := &metrics{
			requests: s.CounterVec("requests_total",
				"HTTP requests, by path (/validate, /healthz, /metrics, other) and status code.",
				"path", "code"),
			reviews: s.CounterVec("reviews_total",
				"Admission decisions: allowed, warned (allowed with warnings), denied, skipped (not a Pod CREATE).",
				"outcome"),
			violations: s.CounterVec("violations_total",
				"Problems found in pods, by field path (indexes removed) and action (deny or warn).",
				"field", "action"),
			duration: s.Histogram("review_duration_seconds",
				"Time to answer a /validate request with an AdmissionResponse, from the handler's start to the response written.",
				[]float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5}),
			reloads: s.CounterVec("cert_reloads_total",
				"Loads of the serving certificate and key after a file change, by result (ok, error); on error the previous pair stays in use.",
				"result"),
			notAfter: s.Gauge("cert_not_after_timestamp_seconds",
				"Expiry (Unix time) of the serving certificate in use."),
			inFlight: s.GaugeFunc("request_bytes_in_flight",
				"Request body bytes being read and decoded, as taken from the in-flight budget.",
				func() float64 { return float64(budget.inUse()) }),
		}
		m.outcomes = map[Outcome]prometheus.Counter{}
		for _, o := range []Outcome{OutcomeAllowed, OutcomeWarned, OutcomeDenied, OutcomeSkipped} {
			m.outcomes[o] = m.reviews.WithLabelValues(string(o))
		}
		return m
	})
}

var fieldIndex = regexp.MustCompile(`\[[^\]]*\]`)

func (m *metrics) review(o Outcome, vs []Violation, d time.Duration) {
	if c, ok := m.outcomes[o]; ok {
		c.Inc()
	}
	for _, v := range vs {
		action := "warn"
		if v.Deny {
			action = "deny"
		}
		m.violations.WithLabelValues(fieldIndex.ReplaceAllString(v.Field, ""), action).Inc()
	}
	m.duration.Observe(d.Seconds())
}
