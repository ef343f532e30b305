package nodelocal

import (
	"fmt"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
)

type metrics struct {
	hits, misses                 *byType
	coalesced, options, failures prometheus.Counter
}

// commonTypes have their series made up front, so that counting them costs
// no label lookup.
var commonTypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeCNAME,
	dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeHTTPS}

// byType is a counter by query type: the type's name, or "other" for a
// type miekg/dns does not name (so the series are bounded).
type byType struct {
	vec    *prometheus.CounterVec
	common []prometheus.Counter // of commonTypes
}

func newByType(s *prom.Set, name, help string) *byType {
	b := &byType{vec: s.CounterVec(name, help, "type")}
	for _, t := range commonTypes {
		b.common = append(b.common, b.vec.WithLabelValues(dns.TypeToString[t]))
	}
	return b
}

func (b *byType) inc(qtype uint16) {
	for i, t := range commonTypes {
		if t == qtype {
			b.common[i].Inc()
			return
		}
	}
	name, ok := dns.TypeToString[qtype]
	if !ok {
		name = "other"
	}
	b.vec.WithLabelValues(name).Inc()
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	s := prom.NewSet("nodelocal")
	m := &metrics{
		hits:      newByType(s, "cache_hits_total", "Queries answered from the cache, by query type."),
		misses:    newByType(s, "cache_misses_total", "Queries not in the cache (forwarded, or waiting for an identical query in flight), by query type."),
		coalesced: s.Counter("coalesced_total", "Queries that waited for an identical query already in flight instead of being forwarded."),
		options:   s.Counter("autopath_options_total", "Queries forwarded with the autopath search-list option."),
		failures:  s.Counter("upstream_failures_total", "Queries answered SERVFAIL because no upstream answered."),
	}
	if err := s.Register(reg); err != nil {
		return nil, fmt.Errorf("register nodelocal metrics: %w", err)
	}
	return m, nil
}
