package dnscache

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestZones: a Zone sets the TTL bounds, stale serving and prefetch of the
// names under it (the longest zone wins), or turns caching off there, as
// CoreDNS's cache does per server block; other names keep the Config's.
func TestZones(t *testing.T) {
	failing := false
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		if failing {
			r.Rcode = dns.RcodeServerFailure
			return r, nil
		}
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 7200)}
		return r, nil
	}}
	c, clk := newCache(t, next, Config{MaxTTL: 30 * time.Second, Zones: []Zone{
		{Zone: "corp.example", MaxTTL: time.Hour},
		{Zone: "Stale.Corp.Example.", MaxTTL: 10 * time.Second, ServeStale: time.Hour, StaleTTL: 7 * time.Second},
		{Zone: "off.example", Off: true},
	}})
	ask := func(name string) (*dns.Msg, Source) {
		t.Helper()
		r, src, err := c.Answer(context.Background(), query(name, dns.TypeA))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r, src
	}
	for _, tc := range []struct {
		name    string
		ttl     uint32
		cached  bool
		comment string
	}{
		{"a.example.", 30, true, "the Config's MaxTTL"},
		{"x.corp.example.", 3600, true, "the zone's"},
		{"corp.example.", 3600, true, "the zone's apex"},
		{"xcorp.example.", 30, true, "not under corp.example"},
		{"y.stale.corp.example.", 10, true, "the longest zone"},
		{"z.off.example.", 7200, false, "not cached; the reply's own TTL, uncapped"},
	} {
		r, _ := ask(tc.name)
		if got := r.Answer[0].Header().Ttl; got != tc.ttl {
			t.Errorf("%s: TTL %d, want %d (%s)", tc.name, got, tc.ttl, tc.comment)
		}
		if _, src := ask(tc.name); (src == Hit) != tc.cached {
			t.Errorf("%s: second ask %v, want cached %v (%s)", tc.name, src, tc.cached, tc.comment)
		}
	}
	// Past their lifetime, with next failing: the stale zone's answer is
	// served with its StaleTTL; the others are not.
	clk.Advance(11 * time.Second)
	failing = true
	if r, src := ask("y.stale.corp.example."); src != Stale || r.Answer[0].Header().Ttl != 7 {
		t.Errorf("y.stale.corp.example.: %v %v, want the stale answer with TTL 7", src, r)
	}
	clk.Advance(30 * time.Second)
	if r, src := ask("a.example."); src == Stale || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("a.example.: %v %v, want SERVFAIL (no serve_stale outside the zone)", src, r)
	}
}

// TestZonesInvalid: a zone's values are checked as the Config's.
func TestZonesInvalid(t *testing.T) {
	for _, tc := range []struct {
		zone Zone
		err  string
	}{
		{Zone{Zone: "."}, "not a domain name below the root"},
		{Zone{Zone: "a..b"}, "not a domain name"},
		{Zone{Zone: "corp.example", MinTTL: time.Hour}, "zone corp.example.: dnscache: MinTTL 1h0m0s is over MaxTTL 30s"},
		{Zone{Zone: "corp.example", Prefetch: Prefetch{Amount: 1, Percentage: 95}}, "Prefetch.Percentage is 95"},
	} {
		_, err := New(&nextFunc{}, Config{MaxTTL: 30 * time.Second, Zones: []Zone{tc.zone}})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", tc.zone, err, tc.err)
		}
	}
}
