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

// TestConfigOfRoutes: a route with a cache of its own is a Zone, its unset
// fields at their defaults; routes without are not.
func TestConfigOfRoutes(t *testing.T) {
	c := v1alpha1.ServerConfiguration{Forward: []v1alpha1.ForwardRoute{
		{Zone: ".", Upstreams: []string{"10.0.0.1"}},
		{Zone: "corp.example", Upstreams: []string{"10.0.0.2"}, Cache: &v1alpha1.RouteCache{CacheTTLs: v1alpha1.CacheTTLs{MaxTTL: "3600s"}, Prefetch: &v1alpha1.Prefetch{Amount: 5}}},
		{Zone: "off.example", Upstreams: []string{"10.0.0.3"}, Cache: &v1alpha1.RouteCache{Disabled: true}},
	}}
	c.SetDefaults()
	got := ConfigOf(c.Cache, c.Forward...).Zones
	if len(got) != 2 {
		t.Fatalf("zones %+v, want 2", got)
	}
	want := Zone{Zone: "corp.example", MaxTTL: time.Hour, MaxNegativeTTL: 5 * time.Second, StaleTTL: 30 * time.Second,
		Prefetch: Prefetch{Amount: 5, Window: time.Minute, Percentage: 10}}
	if got[0] != want {
		t.Errorf("corp.example: %+v\nwant %+v", got[0], want)
	}
	if !got[1].Off || got[1].Zone != "off.example" {
		t.Errorf("off.example: %+v, want off", got[1])
	}
	if _, err := New(&nextFunc{}, ConfigOf(c.Cache, c.Forward...)); err != nil {
		t.Errorf("New: %v", err)
	}
}
