package dnsserver

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	metricNamespace = "dnsconfigurer"
	metricSubsystem = "dnsserver"
)

// Metrics are the server's Prometheus metrics:
//
//   - dnsconfigurer_dnsserver_requests_total{type,rcode}
//   - dnsconfigurer_dnsserver_request_duration_seconds (histogram)
//   - dnsconfigurer_dnsserver_records{kind} (services, endpoint_slices,
//     endpoints, pods, namespaces, names in the served snapshot)
//   - dnsconfigurer_dnsserver_synced (1 after the first full sync)
//
// A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration prometheus.Histogram

	// fast holds the request counters of the common types and rcodes, so
	// that the query path does not hash label values.
	fast [len(fastTypes)][6]prometheus.Counter
}

// fastTypes are the query types with a precomputed counter.
var fastTypes = [...]uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeCNAME, dns.TypeSOA, dns.TypeNS, dns.TypeANY}

func typeIndex(t uint16) int {
	for i, f := range fastTypes {
		if f == t {
			return i
		}
	}
	return -1
}

// NewMetrics registers the server's metrics on reg. records is read at
// scrape time for the records and synced gauges.
func NewMetrics(reg prometheus.Registerer, records Records) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "requests_total",
			Help: "DNS requests answered, by query type and response code.",
		}, []string{"type", "rcode"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricNamespace, Subsystem: metricSubsystem, Name: "request_duration_seconds",
			Help:    "Time to answer a DNS request, forwarding included.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 2.5},
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, &storeCollector{records: records}} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register dnsserver metrics: %w", err)
		}
	}
	for i, t := range fastTypes {
		for rc := range m.fast[i] {
			m.fast[i][rc] = m.requests.WithLabelValues(dns.TypeToString[t], dns.RcodeToString[rc])
		}
	}
	return m, nil
}

func (m *Metrics) observe(qtype uint16, rcode int, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.Observe(d.Seconds())
	if i := typeIndex(qtype); i >= 0 && rcode >= 0 && rcode < len(m.fast[i]) {
		m.fast[i][rcode].Inc()
		return
	}
	t, ok := dns.TypeToString[qtype]
	if !ok {
		t = "other"
	}
	rc, ok := dns.RcodeToString[rcode]
	if !ok {
		rc = "other"
	}
	m.requests.WithLabelValues(t, rc).Inc()
}

var (
	recordsDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_records",
		"Objects and names in the served snapshot, by kind.", []string{"kind"}, nil)
	syncedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_synced",
		"1 once the records have had their first full sync.", nil, nil)
)

// storeCollector reports the served snapshot's sizes at scrape time.
type storeCollector struct{ records Records }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordsDesc
	ch <- syncedDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.records.Snapshot()
	if snap == nil {
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, 1)
	for kind, v := range map[string]int{
		"services":        snap.Counts.Services,
		"endpoint_slices": snap.Counts.EndpointSlices,
		"endpoints":       snap.Counts.Endpoints,
		"pods":            snap.Counts.Pods,
		"namespaces":      snap.Counts.Namespaces,
		"names":           snap.Counts.Names,
	} {
		ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.GaugeValue, float64(v), kind)
	}
}
