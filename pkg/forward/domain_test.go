package forward_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

func TestDomainOf(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"A.b.Example.com.", "example.com"},
		{"example.com.", "example.com"},
		{"x.example.co.uk.", "example.co.uk"},
		{"r1a2.silent.example.", "silent.example"},
		{"com.", "com"},
		{"localhost.", "localhost"},
		{"4.3.2.1.in-addr.arpa.", "2.1.in-addr.arpa"},
		{"1.in-addr.arpa.", "1.in-addr.arpa"},
		{"b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.ip6.arpa.", "0.0.0.0.1.2.3.4.ip6.arpa"},
		{".", ""},
	} {
		if got := forward.DomainOf(tc.name); got != tc.want {
			t.Errorf("DomainOf(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// silentUnder answers every name but those under zone, which it never
// answers.
func silentUnder(zone string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if strings.HasSuffix(strings.ToLower(r.Question[0].Name), zone) {
			return
		}
		answering.ServeDNS(w, r)
	})
}

// TestMaxConcurrentPerDomain (issue 55 row 3): the names of one domain
// whose servers never answer hold at most MaxConcurrentPerDomain slots,
// shed beyond it and counted, and every other name keeps being answered
// while they wait; before, they filled MaxConcurrent and every other name
// was shed.
func TestMaxConcurrentPerDomain(t *testing.T) {
	up := testkit.NewUpstream(t, silentUnder("silent.example."), testkit.UDPOnly())
	fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: 2 * time.Second, MaxConcurrent: 100})
	reg := testkit.Registry(t, fwd)
	metric := func(name string) float64 { return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_" + name) }

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	silentShed := 0
	for i := range 200 {
		wg.Go(func() {
			m := new(dns.Msg).SetQuestion(fmt.Sprintf("r%d.silent.example.", i), dns.TypeA)
			if _, err := fwd.Exchange(ctx, m); errors.Is(err, forward.ErrOverloaded) {
				mu.Lock()
				silentShed++
				mu.Unlock()
			}
		})
	}
	testkit.WaitEqual(t, 5*time.Second, "in flight", func() float64 { return metric("in_flight") }, 10)
	failed := 0
	for i := range 100 {
		m := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.example%d.org.", i, i%7), dns.TypeA)
		if r, err := fwd.Exchange(ctx, m); err != nil || len(r.Answer) != 1 {
			failed++
		}
	}
	wg.Wait()
	t.Logf("silent names: 200 asked, %d shed; other names: %d of 100 failed; domain_shed_total %v", silentShed, failed, metric("domain_shed_total"))
	if failed != 0 {
		t.Errorf("%d of 100 other names failed while the silent domain waited, want 0", failed)
	}
	if silentShed != 190 || metric("domain_shed_total") != 190 {
		t.Errorf("%d silent names shed (domain_shed_total %v), want 190: 10 (a tenth of MaxConcurrent) in flight", silentShed, metric("domain_shed_total"))
	}
}

// TestFailFastAllUnhealthy (issue 55 row 8): with every upstream down by
// its health probes, a new name fails at once with ErrAllDown when
// FailFastAllUnhealthy is set; without it one upstream is still asked.
func TestFailFastAllUnhealthy(t *testing.T) {
	for _, failFast := range []bool{true, false} {
		t.Run(fmt.Sprintf("failfast=%v", failFast), func(t *testing.T) {
			up := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly())
			fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: time.Second,
				HealthCheck: 100 * time.Millisecond, FailFastAllUnhealthy: failFast})
			reg := testkit.Registry(t, fwd)
			fwd.Start(context.Background())
			// A failed query asks for the health probes, which decide.
			if _, err := fwd.Exchange(context.Background(), new(dns.Msg).SetQuestion("first.example.org.", dns.TypeA)); err == nil {
				t.Fatal("the silent upstream answered")
			}
			testkit.WaitEqual(t, 10*time.Second, "upstream healthy", func() float64 {
				return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_upstream_healthy")
			}, 0)
			begin := time.Now()
			_, err := fwd.Exchange(context.Background(), new(dns.Msg).SetQuestion("new.example.org.", dns.TypeA))
			took := time.Since(begin)
			t.Logf("every upstream down: %v after %v", err, took.Round(time.Millisecond))
			if failFast && (!errors.Is(err, forward.ErrAllDown) || took > 300*time.Millisecond) {
				t.Errorf("got %v after %v, want ErrAllDown within 300 ms", err, took)
			}
			if !failFast && (err == nil || errors.Is(err, forward.ErrAllDown) || took < 500*time.Millisecond) {
				t.Errorf("got %v after %v, want the upstream asked (a timeout)", err, took)
			}
		})
	}
}

func TestFailFastNeedsHealthChecks(t *testing.T) {
	_, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{"127.0.0.1"}, MaxFails: forward.NoHealthCheck, FailFastAllUnhealthy: true})
	if err == nil || !strings.Contains(err.Error(), "FailFastAllUnhealthy: needs health checks") {
		t.Errorf("got %v, want FailFastAllUnhealthy refused without health checks", err)
	}
	_, err = forward.New(forward.Config{Upstreams: forward.StaticUpstreams{"127.0.0.1"}, MaxConcurrent: 10, MaxConcurrentPerDomain: 11})
	if err == nil || !strings.Contains(err.Error(), "MaxConcurrentPerDomain: 11 is over MaxConcurrent (10)") {
		t.Errorf("got %v, want MaxConcurrentPerDomain over MaxConcurrent refused", err)
	}
}
