package dnscache

import "github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"

// ConfigOf is the cache section of a ServerConfiguration as a Config
// (both serve modes; Server and Logger are the caller's).
func ConfigOf(c v1alpha1.ServerCache) Config {
	return Config{
		SuccessBytes: c.SuccessBytes.Bytes(), DenialBytes: c.DenialBytes.Bytes(),
		MaxTTL: c.MaxTTL.Duration(), MinTTL: c.MinTTL.Duration(),
		MaxNegativeTTL: c.MaxNegativeTTL.Duration(), MinNegativeTTL: c.MinNegativeTTL.Duration(),
		ServeStale: c.ServeStale.Duration(), StaleTTL: c.StaleTTL.Duration(),
		Prefetch: Prefetch{Amount: c.Prefetch.Amount, Window: c.Prefetch.Window.Duration(), Percentage: c.Prefetch.Percentage},
	}
}
