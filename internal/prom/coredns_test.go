package prom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCoreDNSNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_dnsserver_requests_total", Help: "h", ConstLabels: prometheus.Labels{"server": "cluster"}},
		[]string{"zone", "proto", "family", "type"})
	requests.WithLabelValues("cluster.local.", "udp", "1", "A").Add(3)
	requests.WithLabelValues(".", "tcp", "2", "AAAA").Add(1)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dnsconfigurer_dnsserver_request_duration_seconds", Help: "h",
		ConstLabels: prometheus.Labels{"server": "cluster"}, Buckets: []float64{0.001, 0.1}}, []string{"zone", "type"})
	duration.WithLabelValues(".", "A").Observe(0.0005)
	duration.WithLabelValues(".", "AAAA").Observe(0.05)
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_cache_hits_total", Help: "h", ConstLabels: prometheus.Labels{"server": "cluster"}}, []string{"kind"})
	hits.WithLabelValues("success").Add(5)
	hits.WithLabelValues("denial").Add(1)
	misses := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_cache_misses_total", Help: "h", ConstLabels: prometheus.Labels{"server": "cluster"}}, []string{"kind"})
	misses.WithLabelValues("success").Add(2)
	misses.WithLabelValues("other").Add(1)
	fwd := func(zone string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_forward_requests_total", Help: "h", ConstLabels: prometheus.Labels{"zone": zone}}, []string{"upstream"})
	}
	root, stub := fwd("."), fwd("corp.example.")
	root.WithLabelValues("10.0.0.1:53").Add(4)
	stub.WithLabelValues("10.0.0.1:53").Add(2) // one upstream of two zones: one CoreDNS series
	stub.WithLabelValues("10.0.0.2:53").Add(1)
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dnsconfigurer_serve_config_reloads_total", Help: "h"}, []string{"result"})
	reloads.WithLabelValues("applied").Add(7)
	reloads.WithLabelValues("failed").Add(2)
	reg.MustRegister(requests, duration, hits, misses, root, stub, reloads)

	g := NewCoreDNSNames(reg, "dns://:53", true)
	want := `
# HELP coredns_dns_requests_total Counter of DNS requests made per zone, protocol and family.
# TYPE coredns_dns_requests_total counter
coredns_dns_requests_total{family="1",proto="udp",server="dns://:53",type="A",view="",zone="cluster.local."} 3
coredns_dns_requests_total{family="2",proto="tcp",server="dns://:53",type="AAAA",view="",zone="."} 1
# HELP coredns_dns_request_duration_seconds Histogram of the time (in seconds) each request took per zone.
# TYPE coredns_dns_request_duration_seconds histogram
coredns_dns_request_duration_seconds_bucket{server="dns://:53",view="",zone=".",le="0.001"} 1
coredns_dns_request_duration_seconds_bucket{server="dns://:53",view="",zone=".",le="0.1"} 2
coredns_dns_request_duration_seconds_bucket{server="dns://:53",view="",zone=".",le="+Inf"} 2
coredns_dns_request_duration_seconds_sum{server="dns://:53",view="",zone="."} 0.0505
coredns_dns_request_duration_seconds_count{server="dns://:53",view="",zone="."} 2
# HELP coredns_cache_hits_total The count of cache hits.
# TYPE coredns_cache_hits_total counter
coredns_cache_hits_total{server="dns://:53",type="denial",view="",zones="."} 1
coredns_cache_hits_total{server="dns://:53",type="success",view="",zones="."} 5
# HELP coredns_cache_misses_total The count of cache misses. Deprecated, derive misses from cache hits/requests counters.
# TYPE coredns_cache_misses_total counter
coredns_cache_misses_total{server="dns://:53",view="",zones="."} 3
# HELP coredns_cache_requests_total The count of cache requests.
# TYPE coredns_cache_requests_total counter
coredns_cache_requests_total{server="dns://:53",view="",zones="."} 9
# HELP coredns_forward_requests_total Counter of requests made per upstream.
# TYPE coredns_forward_requests_total counter
coredns_forward_requests_total{to="10.0.0.1:53"} 6
coredns_forward_requests_total{to="10.0.0.2:53"} 1
# HELP coredns_reload_failed_total Counter of the number of failed reload attempts.
# TYPE coredns_reload_failed_total counter
coredns_reload_failed_total 2
`
	names := []string{"coredns_dns_requests_total", "coredns_dns_request_duration_seconds", "coredns_cache_hits_total", "coredns_cache_misses_total",
		"coredns_cache_requests_total", "coredns_forward_requests_total", "coredns_reload_failed_total"}
	if err := testutil.GatherAndCompare(g, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Our families stay as they are, and the histogram of ours is intact.
	if n, err := testutil.GatherAndCount(g, "dnsconfigurer_dnsserver_request_duration_seconds"); err != nil || n != 2 {
		t.Errorf("our duration histogram: %d series, %v; want 2", n, err)
	}
	if problems, err := testutil.GatherAndLint(g); err != nil {
		t.Errorf("lint: %v", err)
	} else {
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "coredns_") {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		}
	}

	g.SetEnabled(false)
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "coredns_") {
			t.Errorf("off: %s gathered", mf.GetName())
		}
	}
}

func TestCoreDNSMappingsDistinct(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, m := range CoreDNSMappings() {
		if !strings.HasPrefix(m[0], "coredns_") || !strings.HasPrefix(m[1], "dnsconfigurer_") {
			t.Errorf("%s from %s: want coredns_* from dnsconfigurer_*", m[0], m[1])
		}
		if seen[m] {
			t.Errorf("%s from %s: twice", m[0], m[1])
		}
		seen[m] = true
	}
}
