package dnscache

import "github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"

// ConfigOf is the cache section of a ServerConfiguration as a Config
// (both serve modes; Server and Logger are the caller's), with a Zone for
// each route of routes that has a cache of its own.
func ConfigOf(c v1alpha1.ServerCache, routes ...v1alpha1.ForwardRoute) Config {
	var zones []Zone
	for _, r := range routes {
		if rc := r.Cache; rc != nil {
			z := Zone{Zone: r.Zone, Off: rc.Disabled, MaxTTL: rc.MaxTTL.Duration(), MinTTL: rc.MinTTL.Duration(),
				MaxNegativeTTL: rc.MaxNegativeTTL.Duration(), MinNegativeTTL: rc.MinNegativeTTL.Duration(),
				ServeStale: rc.ServeStale.Duration(), StaleTTL: rc.StaleTTL.Duration()}
			if p := rc.Prefetch; p != nil {
				z.Prefetch = Prefetch{Amount: p.Amount, Window: p.Window.Duration(), Percentage: p.Percentage}
			}
			zones = append(zones, z)
		}
	}
	return Config{Zones: zones,
		SuccessBytes: c.SuccessBytes.Bytes(), DenialBytes: c.DenialBytes.Bytes(),
		MaxTTL: c.MaxTTL.Duration(), MinTTL: c.MinTTL.Duration(),
		MaxNegativeTTL: c.MaxNegativeTTL.Duration(), MinNegativeTTL: c.MinNegativeTTL.Duration(),
		ServeStale: c.ServeStale.Duration(), StaleTTL: c.StaleTTL.Duration(),
		Prefetch: Prefetch{Amount: c.Prefetch.Amount, Window: c.Prefetch.Window.Duration(), Percentage: c.Prefetch.Percentage},
	}
}
