package dnscache

import (
	"testing"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// TestConfigOf: the cache section, defaults set, is the Config both serve
// modes run.
func TestConfigOf(t *testing.T) {
	var c v1alpha1.ServerConfiguration
	c.SetDefaults()
	c.Cache.Prefetch.Amount = 3
	c.Cache.MinTTL = "1s"
	got := ConfigOf(c.Cache)
	want := Config{SuccessBytes: 32 << 20, DenialBytes: 8 << 20, MaxTTL: 30 * time.Second, MinTTL: time.Second,
		MaxNegativeTTL: 5 * time.Second, StaleTTL: 30 * time.Second,
		Prefetch: Prefetch{Amount: 3, Window: time.Minute, Percentage: 10}}
	if got.SuccessBytes != want.SuccessBytes || got.DenialBytes != want.DenialBytes || got.MaxTTL != want.MaxTTL ||
		got.MinTTL != want.MinTTL || got.MaxNegativeTTL != want.MaxNegativeTTL || got.MinNegativeTTL != want.MinNegativeTTL ||
		got.ServeStale != want.ServeStale || got.StaleTTL != want.StaleTTL || got.Prefetch != want.Prefetch {
		t.Errorf("ConfigOf = %+v\nwant %+v", got, want)
	}
}
