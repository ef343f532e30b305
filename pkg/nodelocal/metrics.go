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
	m, err := prom.New(reg, "nodelocal", func(s *prom.Set) *metrics {
		return &metrics{
			hits:      newByType(s, "cache_hits_total", "Queries answered from the cache, by query type."),
			misses:    newByType(s, "cache_misses_total", "Queries not in the cache (forwarded, or waiting for an identical query in flight), by query type."),
			coalesced: s.Counter("coalesced_total", "Queries that waited for an identical query already in flight instead of being forwarded."),
			options:   s.Counter("autopath_options_total", "Queries forwarded with the autopath search-list option."),
			failures:  s.Counter("upstream_failures_total", "Queries answered SERVFAIL because no upstream answered."),
		}
	})
	if err != nil {
		return nil, fmt.Errorf("register nodelocal metrics: %w", err)
	}
	return m, nil
}

// routeMetrics are the stage's routing metrics: where forwarded queries
// went, and the routes of nodeLocal.clusterConfig.
type routeMetrics struct {
	toCluster, toDirect prometheus.Counter
	routes, unbounded   prometheus.Gauge
	configErrors        prometheus.Counter
	configOK            prometheus.Gauge
}

func newRouteMetrics(reg prometheus.Registerer) (*routeMetrics, error) {
	m, err := prom.New(reg, "nodelocal", func(s *prom.Set) *routeMetrics {
		fwd := s.CounterVec("forwarded_total", "Queries forwarded, by upstream: cluster (nodeLocal.clusterUpstream) or direct (the node's nameservers).", "upstream")
		m := &routeMetrics{
			toCluster: fwd.WithLabelValues("cluster"),
			toDirect:  fwd.WithLabelValues("direct"),
			routes:    s.Gauge("cluster_routes", "Zones and names sent to the cluster DNS: the cluster zones and those nodeLocal.clusterConfig makes special."),
			unbounded: s.Gauge("cluster_routes_unbounded", "1 when every name goes to the cluster DNS because a rule of nodeLocal.clusterConfig cannot be bounded to zones (a prefix, substring or regex rewrite; an unreadable hosts file)."),
			configErrors: s.Counter("cluster_config_errors_total",
				"Reads of nodeLocal.clusterConfig that failed (missing, unreadable, invalid); the last good routes stay in service."),
			configOK: s.Gauge("cluster_config_last_read_ok", "1 when the last read of nodeLocal.clusterConfig was good (or none is set)."),
		}
		m.configOK.Set(1)
		return m
	})
	if err != nil {
		return nil, fmt.Errorf("register nodelocal route metrics: %w", err)
	}
	return m, nil
}
