package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
)

// minCacheSize is the smallest --cache-size: below it a few large answers
// would fill the cache.
const minCacheSize = 1 << 20

// byteSize is a flag of bytes, as an integer or a Kubernetes quantity
// ("32Mi", "64M").
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteSize) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("%q: want bytes, e.g. 33554432 or 32Mi", v)
	}
	*b = byteSize(q.Value())
	return nil
}

// registerCacheFlags binds the cache flags to the cache section (both
// modes). --cache-size is split: 4/5 for answers, 1/5 for denials.
func registerCacheFlags(l *flaglayer.Layer[serverConfig]) {
	type cfg = serverConfig
	size := byteSize(v1alpha1.DefaultSuccessBytes.Bytes() + v1alpha1.DefaultDenialBytes.Bytes())
	split := func(c *cfg) {
		c.Cache.SuccessBytes = byteSize(size / 5 * 4).bytes()
		c.Cache.DenialBytes = byteSize(size / 5).bytes()
	}
	l.Var(&size, "cache-size", "cache.successBytes", "`BYTES` of forwarded answers cached, counted with their overhead (e.g. 32Mi; 4/5 for answers, 1/5 for denials)", split)
	l.Var(&size, "cache-bytes", "cache.successBytes", "old name of --cache-size", split)
	zone := byteSize(v1alpha1.DefaultZoneBytes.Bytes())
	l.Var(&zone, "zone-cache-size", "cache.zoneBytes", "cluster mode: `BYTES` of packed replies made from the cluster zone kept per snapshot (e.g. 16Mi, at least 1Mi; about 250 bytes a reply)",
		func(c *cfg) { c.Cache.ZoneBytes = zone.bytes() })
	l.Duration(func(c *cfg) *v1alpha1.Duration { return &c.Cache.MaxTTL }, "max-ttl", v1alpha1.DefaultMaxTTL, "longest time a positive forwarded answer is cached")
	l.Duration(func(c *cfg) *v1alpha1.Duration { return &c.Cache.MaxNegativeTTL }, "max-negative-ttl", v1alpha1.DefaultMaxNegativeTTL, "longest time a forwarded NXDOMAIN/NODATA is cached")
	l.Duration(func(c *cfg) *v1alpha1.Duration { return &c.Cache.ServeStale }, "serve-stale", v1alpha1.DefaultServeStale, "when every upstream fails, serve an expired answer up to this long past its expiry, with TTL 30 (RFC 8767; 0: off)")
	l.Int(func(c *cfg) *int { return &c.Cache.Prefetch.Amount }, "prefetch", v1alpha1.DefaultPrefetchAmount, "refresh an answer asked `N` times within a minute before it expires (0: off)")
}

// bytes is b as the api writes a size: "32Mi", or a plain count.
func (b byteSize) bytes() v1alpha1.ByteSize { return v1alpha1.ByteSize(b.String()) }

// checkCacheSize checks --cache-size, whose total the configuration
// splits into its two bounds.
func checkCacheSize(size byteSize) error {
	if size < minCacheSize {
		return fmt.Errorf("--cache-size %d: at least %d bytes (1Mi); it is a size in bytes (an entry count before), e.g. 32Mi", size, minCacheSize)
	}
	return nil
}
