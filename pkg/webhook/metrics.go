package webhook

import (
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	metricNamespace = "dnsconfigurer"
	metricSubsystem = "webhook"
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
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "requests_total",
			Help: "HTTP requests, by path (/validate, /healthz, /metrics, other) and status code.",
		}, []string{"path", "code"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "reviews_total",
			Help: "Admission decisions: allowed, warned (allowed with warnings), denied, skipped (not a Pod CREATE).",
		}, []string{"outcome"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "violations_total",
			Help: "Problems found in pods, by field path (indexes removed) and action (deny or warn).",
		}, []string{"field", "action"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "review_duration_seconds",
			Help:    "Time to answer a /validate request with an AdmissionResponse, from the handler's start to the response written.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5},
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "cert_reloads_total",
			Help: "Loads of the serving certificate and key after a file change, by result (ok, error); on error the previous pair stays in use.",
		}, []string{"result"}),
		notAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "cert_not_after_timestamp_seconds",
			Help: "Expiry (Unix time) of the serving certificate in use.",
		}),
	}
	m.inFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "request_bytes_in_flight",
		Help: "Request body bytes being read and decoded, as taken from the in-flight budget.",
	}, func() float64 { return float64(budget.inUse()) })
	m.outcomes = map[Outcome]prometheus.Counter{}
	for _, o := range []Outcome{OutcomeAllowed, OutcomeWarned, OutcomeDenied, OutcomeSkipped} {
		m.outcomes[o] = m.reviews.WithLabelValues(string(o))
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.reviews, m.violations, m.duration, m.reloads, m.notAfter, m.inFlight} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
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
