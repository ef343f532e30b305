package v1alpha1

import "strings"

// RouteCache is the cache policy of a forward route's names, as a CoreDNS
// server block's own cache sets it: its TTL bounds, stale serving and
// prefetch, or none at all (disabled: a block without cache). The capacities
// stay those of cache (shared). An unset field takes the default of the
// same field of cache, not cache's value: a route's policy is whole.
// Not for zone ".", whose policy is cache's.
//
//	forward:
//	- zone: corp.example
//	  upstreams: ["10.0.0.53"]
//	  cache:
//	    maxTTL: 3600s
//	    prefetch: {amount: 10, window: 1m, percentage: 10}
type RouteCache struct {
	// Disabled: the route's answers are not cached.
	Disabled bool `json:"disabled,omitempty"`
	// MaxTTL, MinTTL, MaxNegativeTTL, MinNegativeTTL, ServeStale,
	// StaleTTL and Prefetch are cache's fields of the same names.
	MaxTTL         Duration  `json:"maxTTL,omitempty"`
	MinTTL         Duration  `json:"minTTL,omitempty"`
	MaxNegativeTTL Duration  `json:"maxNegativeTTL,omitempty"`
	MinNegativeTTL Duration  `json:"minNegativeTTL,omitempty"`
	ServeStale     Duration  `json:"serveStale,omitempty"`
	StaleTTL       Duration  `json:"staleTTL,omitempty"`
	Prefetch       *Prefetch `json:"prefetch,omitempty"`
}

// policy is r as a ServerCache with cache's capacities, which shares
// ServerCache's defaults and checks.
func (r *RouteCache) policy(cache ServerCache) ServerCache {
	p := ServerCache{SuccessBytes: cache.SuccessBytes, DenialBytes: cache.DenialBytes, ZoneBytes: cache.ZoneBytes,
		MaxTTL: r.MaxTTL, MinTTL: r.MinTTL, MaxNegativeTTL: r.MaxNegativeTTL, MinNegativeTTL: r.MinNegativeTTL,
		ServeStale: r.ServeStale, StaleTTL: r.StaleTTL}
	if r.Prefetch != nil {
		p.Prefetch = *r.Prefetch
	}
	return p
}

func (r *RouteCache) setDefaults() {
	p := r.policy(ServerCache{})
	p.setDefaults()
	r.MaxTTL, r.MinTTL, r.MaxNegativeTTL, r.MinNegativeTTL = p.MaxTTL, p.MinTTL, p.MaxNegativeTTL, p.MinNegativeTTL
	r.ServeStale, r.StaleTTL = p.ServeStale, p.StaleTTL
	if r.Prefetch != nil {
		*r.Prefetch = p.Prefetch
	}
}

func (r *RouteCache) validate(e *fieldErrors, prefix, zone string, cache ServerCache) {
	if zone == "." {
		e.add(strings.TrimSuffix(prefix, "."), "not for zone \".\": its answers follow cache:")
		return
	}
	p := r.policy(cache)
	p.setDefaults() // an unset prefetch
	p.validate(e, prefix)
}
