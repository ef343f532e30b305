package forward_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

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

// silentName is the i-th name never answered, spread as shape says over
// spread domains or reverse zones.
func silentName(shape string, i, spread int) string {
	d := i % spread
	switch shape {
	case "reverse /16s":
		return fmt.Sprintf("%d.%d.%d.10.in-addr.arpa.silent.", i%250, i/250%250, d)
	case "ip6.arpa /32s":
		return fmt.Sprintf("%x.0.0.0.%x.0.0.0.0.0.0.0.%x.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.silent.", i%16, i/16%16, d%16)
	}
	return fmt.Sprintf("r%d.d%d.example.silent.", i, d)
}

// TestSharesPerClient (issue 66 row 4): names that are never answered,
// spread over 1, 11 or 20 domains, reverse /16s or ip6.arpa /32s, asked
// 1.5 times MaxConcurrent at once by one client, cost the answered names
// of another client nothing: the 50 past the cap are shed (their client
// holds every slot: each is refused, or displaces one of its own of a
// busier domain), and each answered name takes the slot of a silent one.
// The same client's own answered names (shares' rule by domain) are
// TestTake's and test/integration/forwardfair's.
// With the per-domain cap (8c15235) the spread names filled every slot:
// 50-83 of 160 other names failed.
func TestSharesPerClient(t *testing.T) {
	up := testkit.NewUpstream(t, silentUnder(".silent."), testkit.UDPOnly())
	for _, tc := range []struct {
		shape  string
		spread int
	}{
		{"domains", 1},
		{"domains", 11},
		{"domains", 20},
		{"reverse /16s", 11},
		{"ip6.arpa /32s", 11},
	} {
		t.Run(fmt.Sprintf("%s=%d", tc.shape, tc.spread), func(t *testing.T) {
			fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: 2 * time.Second, MaxConcurrent: 100})
			reg := testkit.Registry(t, fwd)
			metric := func(name string) float64 { return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_" + name) }
			attacker := netip.MustParseAddr("10.0.0.66")
			legit := netip.MustParseAddr("10.0.0.7")
			actx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var silentShed atomic.Int64
			for i := range 150 {
				wg.Go(func() {
					m := new(dns.Msg).SetQuestion(silentName(tc.shape, i, tc.spread), dns.TypeA)
					if _, err := fwd.Forward(actx, m, dnsmsg.Origin{Client: attacker}); errors.Is(err, forward.ErrOverloaded) {
						silentShed.Add(1)
					}
				})
			}
			// 150 asked, 100 slots: the 50 oldest gave way.
			testkit.WaitEqual(t, 5*time.Second, "shed", func() float64 { return metric("shed_total") }, 50)
			failed := 0
			for i := range 160 {
				m := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.example%d.org.", i, i%7), dns.TypeA)
				if r, err := fwd.Forward(context.Background(), m, dnsmsg.Origin{Client: legit}); err != nil || len(r.Answer) != 1 {
					failed++
				}
			}
			inFlight := metric("in_flight")
			stop()
			wg.Wait()
			t.Logf("150 silent names in flight, %d shed; other names: %d of 160 failed; shed_total %v", silentShed.Load(), failed, metric("shed_total"))
			if failed != 0 {
				t.Errorf("%d of 160 answered names failed beside the silent ones, want 0", failed)
			}
			if inFlight > 100 {
				t.Errorf("in_flight %v, want at most MaxConcurrent (100)", inFlight)
			}
			// The answered names are asked one after another: the first
			// takes a silent one's slot, and frees it for the next.
			if want := int64(50 + 1); silentShed.Load() != want || metric("shed_total") != float64(want) {
				t.Errorf("%d silent names shed (shed_total %v), want %d", silentShed.Load(), metric("shed_total"), want)
			}
		})
	}
}

// TestSharesTwoClients: two clients asking only silent names share the
// slots: the one holding the most gives way, so each keeps about half.
func TestSharesTwoClients(t *testing.T) {
	up := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly())
	fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: 2 * time.Second, MaxConcurrent: 10})
	reg := testkit.Registry(t, fwd)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var shed [2]atomic.Int64
	ask := func(c, i int) {
		wg.Go(func() {
			o := dnsmsg.Origin{Client: netip.AddrFrom4([4]byte{10, 0, 0, byte(c + 1)})}
			m := new(dns.Msg).SetQuestion(fmt.Sprintf("q%d.c%d.example.", i, c), dns.TypeA)
			if _, err := fwd.Forward(ctx, m, o); errors.Is(err, forward.ErrOverloaded) {
				shed[c].Add(1)
			}
		})
	}
	// The first client takes all ten slots, then the second asks five.
	for i := range 10 {
		ask(0, i)
	}
	testkit.WaitEqual(t, 5*time.Second, "in flight", func() float64 { return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_in_flight") }, 10)
	for i := range 5 {
		ask(1, i)
		testkit.WaitEqual(t, 5*time.Second, "shed", func() float64 { return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_shed_total") }, float64(i+1))
	}
	clients := testkit.Gather(t, reg).Sum("dnsconfigurer_forward_clients")
	stop()
	wg.Wait()
	if shed[0].Load() != 5 || shed[1].Load() != 0 || clients != 2 {
		t.Errorf("shed %d of the first client and %d of the second, %v clients; want 5, 0 and 2", shed[0].Load(), shed[1].Load(), clients)
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
}

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
