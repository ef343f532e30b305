package dnsserver

import "github.com/prometheus/client_golang/prometheus"

var (
	forwardInFlightDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_forward_in_flight",
		"Forwarded queries waiting for an upstream (coalesced ones included).", nil, nil)
	forwardRejectedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_forward_rejected_total",
		"Queries not forwarded because the in-flight limit was reached (answered SERVFAIL).", nil, nil)
	forwardLoopsDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_forward_loops_total",
		"Queries not forwarded because they carried this server's loop marker, or too many (answered SERVFAIL).", nil, nil)
	forwardCoalescedDesc = prometheus.NewDesc(metricNamespace+"_"+metricSubsystem+"_forward_coalesced_total",
		"Queries that waited for an identical query in flight instead of being sent.", nil, nil)
)

// Forwarder is a prometheus.Collector of its limits (register it on the
// registry of the other metrics):
//
//   - dnsconfigurer_dnsserver_forward_in_flight
//   - dnsconfigurer_dnsserver_forward_rejected_total
//   - dnsconfigurer_dnsserver_forward_loops_total
//   - dnsconfigurer_dnsserver_forward_coalesced_total
var _ prometheus.Collector = (*Forwarder)(nil)

// Describe implements prometheus.Collector.
func (f *Forwarder) Describe(ch chan<- *prometheus.Desc) {
	ch <- forwardInFlightDesc
	ch <- forwardRejectedDesc
	ch <- forwardLoopsDesc
	ch <- forwardCoalescedDesc
}

// Collect implements prometheus.Collector.
func (f *Forwarder) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(forwardInFlightDesc, prometheus.GaugeValue, float64(len(f.slots)))
	ch <- prometheus.MustNewConstMetric(forwardRejectedDesc, prometheus.CounterValue, float64(f.rejected.Load()))
	ch <- prometheus.MustNewConstMetric(forwardLoopsDesc, prometheus.CounterValue, float64(f.loops.Load()))
	ch <- prometheus.MustNewConstMetric(forwardCoalescedDesc, prometheus.CounterValue, float64(f.coalesced.Load()))
}
