package dnscache

import "github.com/prometheus/client_golang/prometheus"

type descs struct {
	hits, misses, stale, prefetches, coalesced, evictions, entries, bytes *prometheus.Desc
}

func newDescs(server string) descs {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("dnsconfigurer_cache_"+name, help, labels, prometheus.Labels{"server": server})
	}
	return descs{
		hits:       d("hits_total", "Queries answered from the cache, by kind of answer (success, denial).", "kind"),
		misses:     d("misses_total", "Queries that asked the next step, by kind of its answer (success, denial, other: errors, SERVFAIL, REFUSED, truncated and other uncacheable replies).", "kind"),
		stale:      d("stale_total", "Expired answers served because the next step failed (RFC 8767)."),
		prefetches: d("prefetches_total", "Background refreshes of popular answers before they expired."),
		coalesced:  d("coalesced_total", "Misses that waited for an identical query already in flight instead of asking the next step."),
		evictions:  d("evictions_total", "Answers dropped to keep the cache within its bounds, or too big to cache, by kind.", "kind"),
		entries:    d("entries", "Answers in the cache, by kind.", "kind"),
		bytes:      d("bytes", "Memory the cached answers are accounted for (packed size as allocated, name and per-entry overhead), by kind.", "kind"),
	}
}

var _ prometheus.Collector = (*Cache)(nil)

// Describe implements prometheus.Collector.
func (c *Cache) Describe(ch chan<- *prometheus.Desc) {
	d := c.desc
	for _, x := range []*prometheus.Desc{d.hits, d.misses, d.stale, d.prefetches, d.coalesced, d.evictions, d.entries, d.bytes} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *Cache) Collect(ch chan<- prometheus.Metric) {
	d := c.desc
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	for _, k := range []Kind{Success, Denial} {
		counter(d.hits, c.hits[k].Load(), k.String())
	}
	for _, k := range []Kind{Success, Denial, Uncached} {
		counter(d.misses, c.misses[k].Load(), k.String())
	}
	counter(d.stale, c.stale.Load())
	counter(d.prefetches, c.prefetches.Load())
	counter(d.coalesced, c.coalesced.Load())
	c.mu.Lock()
	kinds := c.kinds
	c.mu.Unlock()
	for _, k := range []Kind{Success, Denial} {
		counter(d.evictions, kinds[k].evicted, k.String())
		gauge(d.entries, float64(kinds[k].n), k.String())
		gauge(d.bytes, float64(kinds[k].bytes), k.String())
	}
}
