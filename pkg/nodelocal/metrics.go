package nodelocal

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	hits, misses, coalesced, options, failures prometheus.Counter
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
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.hits, m.misses, m.coalesced, m.options, m.failures} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("register nodelocal metrics: %w", err)
			}
		}
	}
	return m, nil
}
