package forward

import (
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Forwarder's own, every one with the const label zone
// (Config.Zone), so that one Forwarder per zone registers on one registry.
type metrics struct {
	inFlight, clients, shed, loops, loopDetected, looping, allDown, coalesced, healthy *prometheus.Desc

	requests      *prometheus.CounterVec   // upstream
	responses     *prometheus.CounterVec   // upstream, rcode
	duration      *prometheus.HistogramVec // upstream, rcode
	errors        *prometheus.CounterVec   // upstream
	healthFails   *prometheus.CounterVec   // upstream
	cacheHits     *prometheus.CounterVec   // upstream, proto
	cacheMisses   *prometheus.CounterVec   // upstream, proto
	badReplies    *prometheus.CounterVec   // upstream
	perUpstream   []*prometheus.MetricVec
	collectorsVec []prometheus.Collector
}

func newMetrics(zone string) *metrics {
	cl := prometheus.Labels{"zone": zone}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("dnsconfigurer_forward_"+name, help, labels, cl)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dnsconfigurer", Subsystem: "forward", Name: name, Help: help, ConstLabels: cl}, labels)
	}
	m := &metrics{
		inFlight:     desc("in_flight", "Forwarded queries waiting for an upstream (those waiting on an identical one not included)."),
		shed:         desc("shed_total", "Queries in flight that gave their slot to a newer one because MaxConcurrent were in flight: the oldest of the client holding the most (ErrOverloaded)."),
		clients:      desc("clients", "Clients (source addresses) with a query in flight; MaxConcurrent is shared between them."),
		loops:        desc("loops_total", "Queries not forwarded because they carried this forwarder's loop marker or too many, or were its own loop probe."),
		loopDetected: desc("loop_detected_total", "Upstreams found to forward queries back to this forwarder (a query or loop probe came back), once each until the upstream list changes."),
		looping:      desc("looping_upstreams", "Upstreams not used because their loop probe came back without the loop marker."),
		allDown:      desc("all_down_total", "Queries sent to one random upstream because every upstream was down."),
		coalesced:    desc("coalesced_total", "Queries that waited for an identical query in flight instead of being sent."),
		healthy:      desc("upstream_healthy", "1 if the upstream is used, 0 while it is down or loops back.", "upstream"),
		requests:     counter("requests_total", "Queries sent to upstreams (a TCP retry counts again).", "upstream"),
		responses:    counter("responses_total", "Replies accepted from upstreams, by rcode.", "upstream", "rcode"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dnsconfigurer", Subsystem: "forward", Name: "request_duration_seconds",
			Help: "Time from sending a query to an upstream to its accepted reply, by the reply's rcode.", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16)}, []string{"upstream", "rcode"}),
		errors:      counter("upstream_errors_total", "Failed exchanges with upstreams (timeouts, refused connections, errors).", "upstream"),
		healthFails: counter("healthcheck_failures_total", "Health probes that got no reply.", "upstream"),
		cacheHits:   counter("conn_cache_hits_total", "Queries sent on a pooled connection.", "upstream", "proto"),
		cacheMisses: counter("conn_cache_misses_total", "Queries that needed a new connection.", "upstream", "proto"),
		badReplies:  counter("dropped_replies_total", "Replies dropped for a wrong ID or question (the read went on).", "upstream"),
	}
	for _, v := range []*prometheus.CounterVec{m.requests, m.responses, m.errors, m.healthFails, m.cacheHits, m.cacheMisses, m.badReplies} {
		m.perUpstream = append(m.perUpstream, v.MetricVec)
		m.collectorsVec = append(m.collectorsVec, v)
	}
	m.perUpstream = append(m.perUpstream, m.duration.MetricVec)
	m.collectorsVec = append(m.collectorsVec, m.duration)
	return m
}

// rcodeName is the rcode label of a reply: its name, or "other" for an
// rcode miekg/dns does not name.
func rcodeName(rcode int) string {
	if n, ok := dns.RcodeToString[rcode]; ok {
		return n
	}
	return "other"
}

// forget drops the series of an upstream no longer listed.
func (m *metrics) forget(addr string) {
	for _, v := range m.perUpstream {
		v.DeletePartialMatch(prometheus.Labels{"upstream": addr})
	}
}

// Forwarder is a prometheus.Collector of its metrics (register it on the
// registry of the other metrics; several Forwarders with distinct
// Config.Zone register together). Every series has the label zone:
//
//   - dnsconfigurer_forward_in_flight, _clients
//   - dnsconfigurer_forward_shed_total
//   - dnsconfigurer_forward_loops_total (per-query marker or own probe)
//   - dnsconfigurer_forward_loop_detected_total, _looping_upstreams
//   - dnsconfigurer_forward_all_down_total (every upstream down: one asked
//     at random, or none with FailFastAllUnhealthy)
//   - dnsconfigurer_forward_coalesced_total
//   - dnsconfigurer_forward_upstream_healthy{upstream}
//   - dnsconfigurer_forward_requests_total{upstream}
//   - dnsconfigurer_forward_responses_total{upstream,rcode}
//   - dnsconfigurer_forward_request_duration_seconds{upstream,rcode}
//   - dnsconfigurer_forward_upstream_errors_total{upstream}
//   - dnsconfigurer_forward_healthcheck_failures_total{upstream}
//   - dnsconfigurer_forward_conn_cache_hits_total{upstream,proto},
//     _conn_cache_misses_total{upstream,proto}
//   - dnsconfigurer_forward_dropped_replies_total{upstream}
var _ prometheus.Collector = (*Forwarder)(nil)

// Describe implements prometheus.Collector.
func (f *Forwarder) Describe(ch chan<- *prometheus.Desc) {
	m := f.m
	for _, d := range []*prometheus.Desc{m.inFlight, m.clients, m.shed, m.loops, m.loopDetected, m.looping, m.allDown, m.coalesced, m.healthy} {
		ch <- d
	}
	for _, c := range m.collectorsVec {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (f *Forwarder) Collect(ch chan<- prometheus.Metric) {
	m := f.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	count := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	slots, clients := f.shares.usage()
	gauge(m.inFlight, float64(slots))
	gauge(m.clients, float64(clients))
	count(m.shed, f.shed.Load())
	count(m.loops, f.loops.Load())
	count(m.loopDetected, f.loopDetected.Load())
	count(m.allDown, f.allDown.Load())
	count(m.coalesced, f.coalesced.Load())
	looping := 0
	for _, u := range f.list().ups {
		v := 1.0
		if u.looping.Load() {
			looping++
			v = 0
		} else if u.down.Load() {
			v = 0
		}
		gauge(m.healthy, v, u.name)
	}
	gauge(m.looping, float64(looping))
	for _, c := range m.collectorsVec {
		c.Collect(ch)
	}
}
