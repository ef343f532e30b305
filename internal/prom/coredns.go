package prom

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// CoreDNSNames gathers a component's metrics and, while on, the same
// series again under CoreDNS's names and labels (coredns_dns_*,
// coredns_cache_*, coredns_forward_*, coredns_proxy_*, ...), so that
// dashboards and alerts written for CoreDNS work unchanged. The copies are
// made at scrape time from the gathered families: the query path counts
// once, under its own names.
type CoreDNSNames struct {
	g      prometheus.Gatherer
	server string
	on     atomic.Bool
}

// NewCoreDNSNames gathers g, adding CoreDNS's names when on. server is
// the value of CoreDNS's label server, such as "dns://:53"
// (v1alpha1.ServerConfiguration.CoreDNSServer).
func NewCoreDNSNames(g prometheus.Gatherer, server string, on bool) *CoreDNSNames {
	c := &CoreDNSNames{g: g, server: server}
	c.on.Store(on)
	return c
}

// SetEnabled turns CoreDNS's names on or off (a config reload).
func (c *CoreDNSNames) SetEnabled(on bool) { c.on.Store(on) }

// Gather implements prometheus.Gatherer.
func (c *CoreDNSNames) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := c.g.Gather()
	if !c.on.Load() {
		return mfs, err
	}
	out := append(mfs, CoreDNSFamilies(mfs, c.server)...)
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, err
}

// label is one label of a CoreDNS series: copied from the label from of
// our series (renamed), the constant value, or with server the value of
// CoreDNSNames.server.
type label struct {
	name, from, value string
	server            bool
}

func copyOf(name string) label       { return label{name: name, from: name} }
func rename(name, from string) label { return label{name: name, from: from} }
func fixed(name, v string) label     { return label{name: name, value: v} }

var serverLabel = label{name: "server", server: true}

// mapping makes the CoreDNS family to from our family from: series with
// equal CoreDNS labels are summed (our labels CoreDNS has not, such as
// the forwarders' zone, are aggregated away). where, when set, keeps only
// our series with these label values.
type mapping struct {
	to, from, help string
	labels         []label
	where          map[string]string
}

// The label sets the families share: the request families' server, zone
// and view; the caches' server, kind, zones and view (one cache for every
// name); the proxies' name and upstream. Each is followed by the family's
// own labels.
func zoneLabels(ls ...label) []label {
	return append([]label{serverLabel, copyOf("zone"), fixed("view", "")}, ls...)
}

func cacheLabels(ls ...label) []label {
	return append(append([]label{serverLabel}, ls...), fixed("zones", "."), fixed("view", ""))
}

func proxyLabels(ls ...label) []label {
	return append([]label{fixed("proxy_name", "forward"), rename("to", "upstream")}, ls...)
}

// byKind is a cache family's type label, our kind.
var byKind = rename("type", "kind")

// The CoreDNS 1.15 families (plugin/metrics/vars, plugin/cache,
// plugin/forward, plugin/pkg/proxy), and the forward plugin's names
// before CoreDNS 1.11 moved them to coredns_proxy_*, which the
// coredns-mixin and its dashboard still query. view is always "" (no
// views), plugin "" (the server wrote the reply, in CoreDNS's terms: there
// is no plugin chain), zones "." (one cache for every name).
var coreDNSMappings = []mapping{
	{to: "coredns_dns_requests_total", from: "dnsconfigurer_dnsserver_requests_total", help: "Counter of DNS requests made per zone, protocol and family.",
		labels: zoneLabels(copyOf("proto"), copyOf("family"), copyOf("type"))},
	{to: "coredns_dns_responses_total", from: "dnsconfigurer_dnsserver_responses_total", help: "Counter of response status codes.",
		labels: zoneLabels(copyOf("rcode"), fixed("plugin", ""))},
	{to: "coredns_dns_request_duration_seconds", from: "dnsconfigurer_dnsserver_request_duration_seconds", help: "Histogram of the time (in seconds) each request took per zone.",
		labels: zoneLabels()},
	{to: "coredns_dns_request_size_bytes", from: "dnsconfigurer_dnsserver_request_size_bytes", help: "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.",
		labels: zoneLabels(copyOf("proto"))},
	{to: "coredns_dns_response_size_bytes", from: "dnsconfigurer_dnsserver_response_size_bytes", help: "Size of the returned response in bytes.",
		labels: zoneLabels(copyOf("proto"))},
	{to: "coredns_dns_do_requests_total", from: "dnsconfigurer_dnsserver_do_requests_total", help: "Counter of DNS requests with DO bit set per zone.",
		labels: zoneLabels()},
	{to: "coredns_panics_total", from: "dnsconfigurer_dnsserver_panics_total", help: "A metrics that counts the number of panics."},
	{to: "coredns_build_info", from: "dnsconfigurer_build_info", help: "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
		labels: []label{copyOf("version"), copyOf("revision"), copyOf("goversion")}},

	{to: "coredns_cache_entries", from: "dnsconfigurer_cache_entries", help: "The number of elements in the cache.",
		labels: cacheLabels(byKind)},
	{to: "coredns_cache_hits_total", from: "dnsconfigurer_cache_hits_total", help: "The count of cache hits.",
		labels: cacheLabels(byKind)},
	{to: "coredns_cache_misses_total", from: "dnsconfigurer_cache_misses_total", help: "The count of cache misses. Deprecated, derive misses from cache hits/requests counters.",
		labels: cacheLabels()},
	{to: "coredns_cache_requests_total", from: "dnsconfigurer_cache_hits_total", help: "The count of cache requests.",
		labels: cacheLabels()},
	{to: "coredns_cache_requests_total", from: "dnsconfigurer_cache_misses_total",
		labels: cacheLabels()},
	{to: "coredns_cache_evictions_total", from: "dnsconfigurer_cache_evictions_total", help: "The count of cache evictions.",
		labels: cacheLabels(byKind)},
	{to: "coredns_cache_served_stale_total", from: "dnsconfigurer_cache_stale_total", help: "The number of requests served from stale cache entries.",
		labels: cacheLabels()},
	{to: "coredns_cache_prefetch_total", from: "dnsconfigurer_cache_prefetches_total", help: "The number of times the cache has prefetched a cached item.",
		labels: cacheLabels()},

	{to: "coredns_forward_healthcheck_broken_total", from: "dnsconfigurer_forward_all_down_total", help: "Counter of the number of complete failures of the healthchecks."},
	{to: "coredns_forward_max_concurrent_rejects_total", from: "dnsconfigurer_forward_shed_total", help: "Counter of the number of queries rejected because the concurrent queries were at maximum."},
	{to: "coredns_proxy_request_duration_seconds", from: "dnsconfigurer_forward_request_duration_seconds", help: "Histogram of the time each request took.",
		labels: proxyLabels(copyOf("rcode"))},
	{to: "coredns_proxy_healthcheck_failures_total", from: "dnsconfigurer_forward_healthcheck_failures_total", help: "Counter of the number of failed healthchecks.",
		labels: proxyLabels()},
	{to: "coredns_proxy_conn_cache_hits_total", from: "dnsconfigurer_forward_conn_cache_hits_total", help: "Counter of connection cache hits per upstream and protocol.",
		labels: proxyLabels(copyOf("proto"))},
	{to: "coredns_proxy_conn_cache_misses_total", from: "dnsconfigurer_forward_conn_cache_misses_total", help: "Counter of connection cache misses per upstream and protocol.",
		labels: proxyLabels(copyOf("proto"))},

	// The forward plugin's own names before CoreDNS 1.11.
	{to: "coredns_forward_requests_total", from: "dnsconfigurer_forward_requests_total", help: "Counter of requests made per upstream.",
		labels: []label{rename("to", "upstream")}},
	{to: "coredns_forward_responses_total", from: "dnsconfigurer_forward_responses_total", help: "Counter of responses received per upstream.",
		labels: []label{rename("to", "upstream"), copyOf("rcode")}},
	{to: "coredns_forward_request_duration_seconds", from: "dnsconfigurer_forward_request_duration_seconds", help: "Histogram of the time each request took.",
		labels: []label{rename("to", "upstream"), copyOf("rcode")}},
	{to: "coredns_forward_healthcheck_failures_total", from: "dnsconfigurer_forward_healthcheck_failures_total", help: "Counter of the number of failed healthchecks.",
		labels: []label{rename("to", "upstream")}},

	{to: "coredns_reload_failed_total", from: "dnsconfigurer_serve_config_reloads_total", help: "Counter of the number of failed reload attempts.",
		where: map[string]string{"result": "failed"}},
}

// CoreDNSMappings lists the CoreDNS families CoreDNSFamilies makes, each
// with the family of ours it is made from.
func CoreDNSMappings() [][2]string {
	out := make([][2]string, len(coreDNSMappings))
	for i, m := range coreDNSMappings {
		out[i] = [2]string{m.to, m.from}
	}
	return out
}

// CoreDNSFamilies makes CoreDNS's families from ours (mfs), with server as
// the value of the label server. A family of ours that is missing makes
// no CoreDNS family.
func CoreDNSFamilies(mfs []*dto.MetricFamily, server string) []*dto.MetricFamily {
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	var out []*dto.MetricFamily
	made := map[string]*builder{}
	for _, m := range coreDNSMappings {
		src := byName[m.from]
		if src == nil {
			continue
		}
		b := made[m.to]
		if b == nil {
			b = &builder{mf: &dto.MetricFamily{Name: ptr(m.to), Help: ptr(m.help), Type: src.Type}, series: map[string]*dto.Metric{}}
			if src.GetType() == dto.MetricType_UNTYPED {
				b.mf.Type = ptr(dto.MetricType_GAUGE)
			}
			made[m.to] = b
			out = append(out, b.mf)
		}
		for _, s := range src.GetMetric() {
			if keep(s, m.where) {
				b.add(s, m.labels, server)
			}
		}
	}
	return slices.DeleteFunc(out, func(mf *dto.MetricFamily) bool { return len(mf.Metric) == 0 })
}

func keep(s *dto.Metric, where map[string]string) bool {
	for name, v := range where {
		if labelValue(s, name) != v {
			return false
		}
	}
	return true
}

func labelValue(s *dto.Metric, name string) string {
	for _, lp := range s.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// builder sums our series into the CoreDNS family mf by their CoreDNS
// labels.
type builder struct {
	mf     *dto.MetricFamily
	series map[string]*dto.Metric
}

func (b *builder) add(s *dto.Metric, labels []label, server string) {
	pairs := make([]*dto.LabelPair, 0, len(labels))
	var key strings.Builder
	for _, l := range labels {
		v := l.value
		switch {
		case l.server:
			v = server
		case l.from != "":
			v = labelValue(s, l.from)
		}
		pairs = append(pairs, &dto.LabelPair{Name: ptr(l.name), Value: ptr(v)})
		key.WriteString(v)
		key.WriteByte(0)
	}
	slices.SortFunc(pairs, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	k := key.String()
	t := b.series[k]
	if t == nil {
		t = &dto.Metric{Label: pairs}
		b.series[k] = t
		b.mf.Metric = append(b.mf.Metric, t)
	}
	sum(t, s, b.mf.GetType())
}

// sum adds the value of s to t, both of type typ; histograms are added
// bucket by bucket (by upper bound: series of one family have the same).
func sum(t, s *dto.Metric, typ dto.MetricType) {
	switch typ {
	case dto.MetricType_COUNTER:
		if t.Counter == nil {
			t.Counter = &dto.Counter{Value: ptr(0.0)}
		}
		t.Counter.Value = ptr(t.Counter.GetValue() + s.GetCounter().GetValue())
	case dto.MetricType_HISTOGRAM:
		if t.Histogram == nil {
			t.Histogram = &dto.Histogram{SampleCount: ptr(uint64(0)), SampleSum: ptr(0.0)}
		}
		h, sh := t.Histogram, s.GetHistogram()
		h.SampleCount = ptr(h.GetSampleCount() + sh.GetSampleCount())
		h.SampleSum = ptr(h.GetSampleSum() + sh.GetSampleSum())
		for _, sb := range sh.GetBucket() {
			i := slices.IndexFunc(h.Bucket, func(b *dto.Bucket) bool { return b.GetUpperBound() == sb.GetUpperBound() })
			if i < 0 {
				h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: ptr(sb.GetUpperBound()), CumulativeCount: ptr(uint64(0))})
				i = len(h.Bucket) - 1
			}
			h.Bucket[i].CumulativeCount = ptr(h.Bucket[i].GetCumulativeCount() + sb.GetCumulativeCount())
		}
		slices.SortFunc(h.Bucket, func(a, b *dto.Bucket) int {
			switch {
			case a.GetUpperBound() < b.GetUpperBound():
				return -1
			case a.GetUpperBound() > b.GetUpperBound():
				return 1
			}
			return 0
		})
	default: // gauges, untyped
		if t.Gauge == nil {
			t.Gauge = &dto.Gauge{Value: ptr(0.0)}
		}
		t.Gauge.Value = ptr(t.Gauge.GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue())
	}
}

func ptr[T any](v T) *T { return &v }
