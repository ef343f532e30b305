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
	// CacheTTLs and Prefetch are cache's fields of the same names.
	CacheTTLs
	Prefetch *Prefetch `json:"prefetch,omitempty"`
}

// policy is r as a ServerCache with cache's capacities, which shares
// ServerCache's defaults and checks.
func (r *RouteCache) policy(cache ServerCache) ServerCache {
	p := ServerCache{SuccessBytes: cache.SuccessBytes, DenialBytes: cache.DenialBytes, ZoneBytes: cache.ZoneBytes,
		CacheTTLs: r.CacheTTLs}
	if r.Prefetch != nil {
		p.Prefetch = *r.Prefetch
	}
	return p
}

func (r *RouteCache) setDefaults() {
	p := r.policy(ServerCache{})
	p.setDefaults()
	r.CacheTTLs = p.CacheTTLs
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
