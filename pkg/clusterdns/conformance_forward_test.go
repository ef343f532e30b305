package clusterdns_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// Conformance of forwarding: names outside the zone go upstream, never to
// this server, and upstream failures are not cached.

// upstream is a fake upstream on 127.0.0.1 that answers every A query
// with 192.0.2.1 (PTR, ANY and nx.* as below); its Count is the queries.
func upstream(t *testing.T) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, m *dns.Msg) {
		switch {
		case strings.HasPrefix(q.Name, "nx."):
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(q.Name + " 60 IN A 192.0.2.1")
			m.Answer = append(m.Answer, rr)
		case q.Qtype == dns.TypePTR:
			rr, _ := dns.NewRR(q.Name + " 60 IN PTR host.example.")
			m.Answer = append(m.Answer, rr)
		case q.Qtype == dns.TypeANY:
			rr, _ := dns.NewRR(q.Name + ` 60 IN HINFO "RFC8482" ""`)
			m.Answer = append(m.Answer, rr)
		}
	}))
}

func TestConformanceForwarding(t *testing.T) {
	up := upstream(t)
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Self: []string{"127.0.0.1:53"}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5}, fixture, clusterdns.WithForwarder(fwd))
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := ask(t, network, e.addr, "www.example.org.", dns.TypeA, 0)
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" || !r.RecursionAvailable {
				t.Fatalf("forwarded: %v", r)
			}
			if r := ask(t, network, e.addr, "nx.example.org.", dns.TypeA, 1232); r.Rcode != dns.RcodeNameError || r.IsEdns0() == nil {
				t.Fatalf("forwarded NXDOMAIN: %v", r)
			}
			// Reverse names the store does not know go upstream.
			if r := ask(t, network, e.addr, "4.3.2.1.in-addr.arpa.", dns.TypePTR, 0); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("forwarded PTR: %v", r)
			}
			// ExternalName outside the zone: CNAME then the upstream answer.
			r = ask(t, network, e.addr, "ext.prod.svc.cluster.local.", dns.TypeA, 0)
			got := rrStrings(r.Answer)
			want := []string{"api.example.com. 60 IN A 192.0.2.1", "ext.prod.svc.cluster.local. 5 IN CNAME api.example.com."}
			if !slices.Equal(got, want) {
				t.Fatalf("externalname A = %v, want %v", got, want)
			}
		})
	}
	before := up.Count()
	// In-zone names, known reverse names and NXDOMAIN in the zone never go
	// upstream.
	ask(t, "udp", e.addr, "nosuch.prod.svc.cluster.local.", dns.TypeA, 0)
	ask(t, "udp", e.addr, "10.0.96.10.in-addr.arpa.", dns.TypePTR, 0)
	if after := up.Count(); after != before {
		t.Errorf("in-zone queries reached the upstream (%d → %d)", before, after)
	}
}

func TestForwarderNeverSelf(t *testing.T) {
	cases := []struct {
		name   string
		listen []string
		ups    []string
		want   []string
	}{
		{"same address", []string{"127.0.0.1:5353"}, []string{"127.0.0.1:5353", "192.0.2.53"}, []string{"192.0.2.53:53"}},
		// Another socket (systemd-resolved's stub beside a server on
		// 127.0.0.1): kept; the loop marker catches it if it loops back.
		{"other loopback same port", []string{"127.0.0.1:53"}, []string{"127.0.0.53", "10.0.0.10"}, []string{"127.0.0.53:53", "10.0.0.10:53"}},
		{"unspecified listen", []string{"0.0.0.0:53"}, []string{"127.0.0.1", "[::1]:53", "1.1.1.1"}, []string{"1.1.1.1:53"}},
		{"bare port listen (.:53)", []string{":53"}, []string{"127.0.0.1", "[::1]:53", "1.1.1.1", "127.0.0.1:5353"}, []string{"1.1.1.1:53", "127.0.0.1:5353"}},
		{"v6 listen", []string{"[::1]:5353"}, []string{"[::1]:5353", "[::1]:53"}, []string{"[::1]:53"}},
		{"different port kept", []string{"127.0.0.1:5353"}, []string{"127.0.0.1:53"}, []string{"127.0.0.1:53"}},
		{"garbage dropped", []string{"127.0.0.1:5353"}, []string{"not-an-ip", "9.9.9.9"}, []string{"9.9.9.9:53"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams(tc.ups), Self: tc.listen, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Upstreams(); !slices.Equal(got, tc.want) {
				t.Errorf("Upstreams() = %v, want %v", got, tc.want)
			}
		})
	}
	// A server whose only upstream is itself answers SERVFAIL, not a loop.
	st, _ := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	st.Publish()
	h := clusterdns.NewHandler("cluster.local", st)
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h}
	self := testkit.StartServer(t, srv)
	f, _ := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{self}, Self: []string{self}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	h2 := clusterdns.NewHandler("cluster.local", st, clusterdns.WithForwarder(f))
	if r := h2.Resolve(context.Background(), dns.Question{Name: "example.org.", Qtype: dns.TypeA, Qclass: dns.ClassINET}); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("self-only upstream: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

// flakyUpstream fails until ok is set, then answers A 192.0.2.9.
type flakyUpstream struct{ ok atomic.Bool }

func (f *flakyUpstream) Exchange(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	if !f.ok.Load() {
		return nil, fmt.Errorf("upstream down")
	}
	r := new(dns.Msg)
	r.SetReply(m)
	rr, _ := dns.NewRR(m.Question[0].Name + " 60 IN A 192.0.2.9")
	r.Answer = []dns.RR{rr}
	return r, nil
}

// TestExternalNameUpstreamFailureIsNotCached: while the upstream is down an
// outside ExternalName answers its CNAME alone; once it is back, the full
// answer is served (nothing of the failure was cached).
func TestExternalNameUpstreamFailureIsNotCached(t *testing.T) {
	up := &flakyUpstream{}
	e := start(t, store.Options{TTL: 5}, fixture, clusterdns.WithForwarder(up))
	r := ask(t, "udp", e.addr, "ext.prod.svc.cluster.local.", dns.TypeA, 0)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("upstream down: %v", r)
	}
	if r := ask(t, "udp", e.addr, "example.org.", dns.TypeA, 0); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("outside name with the upstream down: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	up.ok.Store(true)
	r = ask(t, "udp", e.addr, "ext.prod.svc.cluster.local.", dns.TypeA, 0)
	if len(r.Answer) != 2 {
		t.Fatalf("upstream back: %v", r.Answer)
	}
	if r := ask(t, "udp", e.addr, "example.org.", dns.TypeA, 0); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("outside name with the upstream back: %v", r)
	}
}
