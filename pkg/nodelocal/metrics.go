package nodelocal

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	hits, misses, coalesced, options, failures, evictions prometheus.Counter
	bytes, entries                                        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "dnsconfigurer_nodelocal_" + name, Help: help})
	}
	m := &metrics{
		hits:      c("cache_hits_total", "Queries answered from the cache."),
		misses:    c("cache_misses_total", "Queries not in the cache."),
		coalesced: c("coalesced_total", "Queries that waited for an identical query already in flight instead of being forwarded."),
		options:   c("autopath_options_total", "Queries forwarded with the autopath search-list option."),
		failures:  c("upstream_failures_total", "Queries answered SERVFAIL because the cluster DNS did not answer."),
		evictions: c("cache_evictions_total", "Answers dropped from the cache to keep it within its bounds, or too big to cache."),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dnsconfigurer_nodelocal_cache_bytes",
			Help: "Memory the cached answers are accounted for (packed size as allocated, name and per-entry overhead)."}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dnsconfigurer_nodelocal_cache_entries",
			Help: "Answers in the cache."}),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.hits, m.misses, m.coalesced, m.options, m.failures, m.evictions, m.bytes, m.entries} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("register nodelocal metrics: %w", err)
			}
		}
	}
	return m, nil
}
