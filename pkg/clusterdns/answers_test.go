package clusterdns_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// withForwarder serves the fixture with a Forwarder to a counting upstream
// on 127.0.0.1 and the extra options.
func withForwarder(t *testing.T, dir string, opts ...clusterdns.Option) (*env, *testkit.Upstream) {
	t.Helper()
	up := upstream(t)
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Self: []string{"127.0.0.1:53"}, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, store.Options{TTL: 5}, dir, append(opts, clusterdns.WithForwarder(fwd))...), up
}

// TestLoadBalance: with WithLoadBalance, A/AAAA RRsets and SRV records come
// in a rotated order per reply, from the cache as well as on a miss, over
// UDP and TCP; the set, the additional section and the reply size do not
// change. Without it the order is fixed.
func TestLoadBalance(t *testing.T) {
	dir := bigHeadless(t, 12)
	cases := []struct {
		name  string
		qname string
		qtype uint16
		n     int // answers
		run   int // records rotated: each starts a reply
	}{
		{"headless A", "big.prod.svc.cluster.local.", dns.TypeA, 12, 12},
		{"headless A three", "db.prod.svc.cluster.local.", dns.TypeA, 3, 3},
		{"headless SRV with additional", "_http._tcp.big.prod.svc.cluster.local.", dns.TypeSRV, 12, 12},
		{"bare service SRV", "db.prod.svc.cluster.local.", dns.TypeSRV, 4, 4},
		{"CNAME to a headless Service", "alias2.prod.svc.cluster.local.", dns.TypeA, 4, 3},
	}
	// alias2 → big: an ExternalName inside the zone, so a CNAME precedes the run.
	if err := os.WriteFile(filepath.Join(dir, "alias2.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: alias2, namespace: prod}\nspec: {type: ExternalName, externalName: db.prod.svc.cluster.local}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	on := start(t, store.Options{TTL: 5}, dir, clusterdns.WithLoadBalance(true))
	off := start(t, store.Options{TTL: 5}, dir)
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				firsts := map[string]int{}
				var set []string
				for i := range 3 * tc.n {
					r := ask(t, network, on.addr, tc.qname, tc.qtype, 4096)
					if r.Truncated || len(r.Answer) != tc.n {
						t.Fatalf("query %d: TC=%v, %d answers, want %d", i, r.Truncated, len(r.Answer), tc.n)
					}
					got := rrStrings(r.Answer) // sorted
					if set == nil {
						set = got
					} else if !slices.Equal(got, set) {
						t.Fatalf("query %d: answer set changed:\n%v\n%v", i, got, set)
					}
					// Every SRV target has its address in the additional
					// section, pointers moved with their records.
					for _, rr := range r.Answer {
						if s, ok := rr.(*dns.SRV); ok && !hasOwner(r.Extra, s.Target) {
							t.Fatalf("query %d: no additional record for %s: %v", i, s.Target, r.Extra)
						}
					}
					firsts[firstOfRun(r.Answer)]++
				}
				if len(firsts) != tc.run {
					t.Errorf("%d queries started with %d different records, want every one of %d: %v", 3*tc.n, len(firsts), tc.run, firsts)
				}
				first := ask(t, network, off.addr, tc.qname, tc.qtype, 4096)
				for range 3 {
					r := ask(t, network, off.addr, tc.qname, tc.qtype, 4096)
					if !slices.Equal(rrLinesExt(r.Answer), rrLinesExt(first.Answer)) {
						t.Fatalf("without load balancing the order changed")
					}
				}
			})
		}
	}
}

// firstOfRun is the first record after any CNAME.
func firstOfRun(rrs []dns.RR) string {
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeCNAME {
			return rr.String()
		}
	}
	return ""
}

func hasOwner(rrs []dns.RR, name string) bool {
	for _, rr := range rrs {
		if strings.EqualFold(rr.Header().Name, name) {
			return true
		}
	}
	return false
}

func rrLinesExt(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

// TestZoneTransferRefused: AXFR and IXFR are REFUSED over UDP and TCP, for
// the zone, a reverse zone and outside names, and never reach an upstream.
func TestZoneTransferRefused(t *testing.T) {
	e, up := withForwarder(t, fixture)
	for _, network := range []string{"udp", "tcp"} {
		for _, qtype := range []uint16{dns.TypeAXFR, dns.TypeIXFR} {
			for _, name := range []string{"cluster.local.", "prod.svc.cluster.local.", "in-addr.arpa.", "example.org."} {
				t.Run(fmt.Sprintf("%s/%s/%s", network, dns.TypeToString[qtype], name), func(t *testing.T) {
					r := ask(t, network, e.addr, name, qtype, 0)
					if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
						t.Fatalf("rcode %s, %d answers, want REFUSED and none", dns.RcodeToString[r.Rcode], len(r.Answer))
					}
				})
			}
		}
	}
	if n := up.Count(); n != 0 {
		t.Errorf("%d zone transfer queries reached the upstream", n)
	}
}

// TestANY: RFC 8482 minimal answers for the names the server answers: a
// synthesized HINFO for names that exist, the CNAME of an ExternalName,
// NXDOMAIN with the SOA for names that do not, never asking the upstream.
// ANY for a name the server forwards is forwarded, as CoreDNS's forward
// does (the upstream's answer, here its own RFC 8482 HINFO), and REFUSED
// without a forwarder.
func TestANY(t *testing.T) {
	e, up := withForwarder(t, fixture)
	noFwd := start(t, store.Options{TTL: 5}, fixture)
	cases := []struct {
		tcase
		e         *env
		forwarded bool
	}{
		{tcase: tcase{name: "service", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{`web.prod.svc.cluster.local. 5 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "apex", qname: "cluster.local.", qtype: dns.TypeANY,
			answer: []string{`cluster.local. 5 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "empty non-terminal", qname: "prod.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{`prod.svc.cluster.local. 5 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "externalname", qname: "ext.prod.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{"ext.prod.svc.cluster.local. 5 IN CNAME api.example.com."}}},
		{tcase: tcase{name: "reverse", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypeANY,
			answer: []string{`10.0.96.10.in-addr.arpa. 5 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "case echoed", qname: "WEB.prod.svc.cluster.local.", qtype: dns.TypeANY,
			answer: []string{`WEB.prod.svc.cluster.local. 5 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "nxdomain", qname: "nosuch.prod.svc.cluster.local.", qtype: dns.TypeANY, rcode: dns.RcodeNameError, soa: true}},
		{tcase: tcase{name: "outside", qname: "example.org.", qtype: dns.TypeANY,
			answer: []string{`example.org. 60 IN HINFO "RFC8482" ""`}}, forwarded: true},
		{tcase: tcase{name: "outside nxdomain", qname: "nx.example.org.", qtype: dns.TypeANY, rcode: dns.RcodeNameError}, forwarded: true},
		{tcase: tcase{name: "unknown reverse", qname: "4.3.2.1.in-addr.arpa.", qtype: dns.TypeANY,
			answer: []string{`4.3.2.1.in-addr.arpa. 60 IN HINFO "RFC8482" ""`}}, forwarded: true},
		{tcase: tcase{name: "outside without forwarder", qname: "example.org.", qtype: dns.TypeANY, rcode: dns.RcodeRefused}, e: noFwd},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				srv := e
				if tc.e != nil {
					srv = tc.e
				}
				before := up.Count()
				check(t, srv, network, 5, tc.tcase)
				if asked := up.Count() - before; asked != map[bool]int{true: 1, false: 0}[tc.forwarded] {
					t.Errorf("upstream asked %d times, want forwarded %v", asked, tc.forwarded)
				}
			})
		}
	}
}

// soaOwner asks and returns the rcode and the owner of the authority SOA
// ("" without one).
func soaOwner(t *testing.T, network, addr, name string, qtype uint16) (*dns.Msg, string) {
	t.Helper()
	r := ask(t, network, addr, name, qtype, 0)
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return r, soa.Hdr.Name
		}
	}
	return r, ""
}

// TestReverseZones: reverse names inside the WithReverseZones prefixes are
// answered here: known ones from the snapshot, unknown ones NXDOMAIN (NODATA
// above known addresses and between the prefix and its zone apex) with the
// SOA of the smallest octet- or nibble-aligned zone holding the prefix; the
// others are forwarded.
func TestReverseZones(t *testing.T) {
	rz, err := clusterdns.WithReverseZones([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00::/62")})
	if err != nil {
		t.Fatal(err)
	}
	e, up := withForwarder(t, fixture, rz)
	const z6 = "0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa." // fd00::/60, 15 nibbles
	// v6 is the reverse name of fd00::<last two nibbles, reversed>.
	v6 := func(last string) string {
		return last + ".0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."
	}
	cases := []struct {
		name     string
		qname    string
		qtype    uint16
		rcode    int
		answers  int
		soaOwner string
		upstream bool
	}{
		{"known clusterIP", "10.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 1, "", false},
		{"unknown in prefix", "99.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, 0, "10.in-addr.arpa.", false},
		{"unknown in prefix, other type", "99.0.96.10.in-addr.arpa.", dns.TypeA, dns.RcodeNameError, 0, "10.in-addr.arpa.", false},
		{"above a known address", "0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 0, "10.in-addr.arpa.", false},
		{"empty /24 in prefix", "7.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, 0, "10.in-addr.arpa.", false},
		{"between zone apex and prefix", "96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 0, "10.in-addr.arpa.", false},
		{"apex SOA", "10.in-addr.arpa.", dns.TypeSOA, dns.RcodeSuccess, 1, "", false},
		{"apex NS", "10.in-addr.arpa.", dns.TypeNS, dns.RcodeSuccess, 1, "", false},
		{"not an address", "x.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, 0, "10.in-addr.arpa.", false},
		{"known v6", v6("0.1"), dns.TypePTR, dns.RcodeSuccess, 1, "", false},
		{"unknown v6", v6("9.9"), dns.TypePTR, dns.RcodeNameError, 0, z6, false},
		{"case", strings.ToUpper("99.0.96.10.in-addr.arpa."), dns.TypePTR, dns.RcodeNameError, 0, "10.in-addr.arpa.", false},
		{"in the zone, outside the prefix", "5.5.5.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 1, "", true},
		{"outside", "4.3.2.1.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 1, "", true},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				before := up.Count()
				r, owner := soaOwner(t, network, e.addr, tc.qname, tc.qtype)
				if r.Rcode != tc.rcode || len(r.Answer) != tc.answers {
					t.Fatalf("rcode %s, answers %v, want %s and %d", dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[tc.rcode], tc.answers)
				}
				if owner != tc.soaOwner {
					t.Errorf("authority SOA owner %q, want %q", owner, tc.soaOwner)
				}
				if went := up.Count() != before; went != tc.upstream {
					t.Errorf("forwarded: %v, want %v", went, tc.upstream)
				}
				if !tc.upstream && !r.Authoritative {
					t.Errorf("AA not set")
				}
			})
		}
	}
	for _, tc := range []struct {
		name string
		p    netip.Prefix
	}{{"zero prefix", netip.Prefix{}}, {"mapped", netip.MustParsePrefix("::ffff:10.0.0.0/104")}} {
		t.Run("error/"+tc.name, func(t *testing.T) {
			if _, err := clusterdns.WithReverseZones([]netip.Prefix{tc.p}); err == nil {
				t.Errorf("WithReverseZones(%v): no error", tc.p)
			}
		})
	}
}

// TestReverseScope: with WithReverseScope the reverse names of the
// cluster's addresses outside the scope are forwarded, as CoreDNS's
// kubernetes plugin with CIDR zones alone; without it they are answered.
// Inside the scope nothing changes, with or without a reverse zone.
func TestReverseScope(t *testing.T) {
	const (
		outside = "1.0.1.10.in-addr.arpa."   // an endpoint, 10.1.0.1
		inside  = "10.0.96.10.in-addr.arpa." // a ClusterIP, 10.96.0.10
		unknown = "99.0.96.10.in-addr.arpa."
	)
	scope := clusterdns.WithReverseScope([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")})
	rz, err := clusterdns.WithReverseZones([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		opts      []clusterdns.Option
		qname     string
		rcode     int
		forwarded bool
	}{
		{"no scope", nil, outside, dns.RcodeSuccess, false},
		{"outside", []clusterdns.Option{scope}, outside, dns.RcodeSuccess, true},
		{"outside, upper case", []clusterdns.Option{scope}, strings.ToUpper(outside), dns.RcodeSuccess, true},
		{"outside, a network", []clusterdns.Option{scope}, "1.10.in-addr.arpa.", dns.RcodeSuccess, true},
		{"inside", []clusterdns.Option{scope}, inside, dns.RcodeSuccess, false},
		{"inside, unknown: forwarded", []clusterdns.Option{scope}, unknown, dns.RcodeSuccess, true},
		{"reverse zone, inside", []clusterdns.Option{scope, rz}, inside, dns.RcodeSuccess, false},
		{"reverse zone, unknown", []clusterdns.Option{scope, rz}, unknown, dns.RcodeNameError, false},
		{"reverse zone, outside", []clusterdns.Option{scope, rz}, outside, dns.RcodeSuccess, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			e, up := withForwarder(t, fixture, opts...)
			for _, network := range []string{"udp", "tcp"} {
				before := up.Count()
				r := ask(t, network, e.addr, tc.qname, dns.TypePTR, 0)
				if r.Rcode != tc.rcode {
					t.Errorf("%s: rcode %s, want %s", network, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
				}
				if went := up.Count() != before; went != tc.forwarded {
					t.Errorf("%s: forwarded %v, want %v (answer %v)", network, went, tc.forwarded, r.Answer)
				}
				if !tc.forwarded && tc.rcode == dns.RcodeSuccess && len(r.Answer) != 1 {
					t.Errorf("%s: answer %v, want the PTR", network, r.Answer)
				}
			}
		})
	}
}

// TestWithoutClusterZone: a handler without the cluster zone answers none
// of the snapshot's names, cluster domain and reverse alike: they are
// forwarded, as by a CoreDNS without its kubernetes plugin.
func TestWithoutClusterZone(t *testing.T) {
	for _, tc := range []struct {
		qname string
		qtype uint16
	}{
		{"web.prod.svc.cluster.local.", dns.TypeA},
		{"nope.prod.svc.cluster.local.", dns.TypeA},
		{"cluster.local.", dns.TypeSOA},
		{"1.0.1.10.in-addr.arpa.", dns.TypePTR},
		{"www.example.com.", dns.TypeA},
	} {
		for _, without := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/without=%v", tc.qname, without), func(t *testing.T) {
				var opts []clusterdns.Option
				if without {
					opts = append(opts, clusterdns.WithoutClusterZone())
				}
				e, up := withForwarder(t, fixture, opts...)
				r := ask(t, "udp", e.addr, tc.qname, tc.qtype, 0)
				want := without || tc.qname == "www.example.com."
				if went := up.Count() > 0; went != want {
					t.Errorf("forwarded %v, want %v (rcode %s, answer %v)", went, want, dns.RcodeToString[r.Rcode], r.Answer)
				}
			})
		}
	}
}

// TestHeadlessAndBareSRV matches CoreDNS 1.15's kubernetes plugin: a
// headless Service without a ready endpoint is NXDOMAIN for every type (its
// namespace stays); SRV at the bare Service name lists every port.
func TestHeadlessAndBareSRV(t *testing.T) {
	dir := bigHeadless(t, 0)
	idle := "apiVersion: v1\nkind: Service\nmetadata: {name: idle, namespace: prod}\nspec:\n  clusterIP: None\n  ports: [{name: http, port: 80}]\n---\n" +
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: idle-1\n  namespace: prod\n  labels: {kubernetes.io/service-name: idle}\naddressType: IPv4\nports: [{name: http, port: 80, protocol: TCP}]\nendpoints:\n- addresses: [10.3.0.1]\n  conditions: {ready: false}\n"
	if err := os.WriteFile(filepath.Join(dir, "idle.yaml"), []byte(idle), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5}, dir)
	cases := []tcase{
		{name: "headless, no ready endpoint, A", qname: "idle.prod.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "headless, no ready endpoint, TXT", qname: "idle.prod.svc.cluster.local.", qtype: dns.TypeTXT, rcode: dns.RcodeNameError, soa: true},
		{name: "headless, no ready endpoint, SRV", qname: "_http._tcp.idle.prod.svc.cluster.local.", qtype: dns.TypeSRV, rcode: dns.RcodeNameError, soa: true},
		{name: "headless, no endpoints at all", qname: "big.prod.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "not-ready endpoint name", qname: "10-3-0-1.idle.prod.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "its namespace stays", qname: "prod.svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "bare SRV clusterIP: every port, one target", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"web.prod.svc.cluster.local. 5 IN SRV 0 33 53 web.prod.svc.cluster.local.",
				"web.prod.svc.cluster.local. 5 IN SRV 0 33 80 web.prod.svc.cluster.local.",
				"web.prod.svc.cluster.local. 5 IN SRV 0 33 8080 web.prod.svc.cluster.local.",
			},
			extra: []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10", "web.prod.svc.cluster.local. 5 IN AAAA fd00::10"}},
		{name: "bare SRV headless: every endpoint and port", qname: "db.prod.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{
				"db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 10-1-1-2.db.prod.svc.cluster.local.",
				"db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 10-1-1-4.db.prod.svc.cluster.local.",
				"db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 db-0.db.prod.svc.cluster.local.",
				"db.prod.svc.cluster.local. 5 IN SRV 0 25 5432 fd00--1-1.db.prod.svc.cluster.local.",
			}},
		{name: "bare SRV externalname is its CNAME", qname: "ext.prod.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"ext.prod.svc.cluster.local. 5 IN CNAME api.example.com."}},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) { check(t, e, network, 5, tc) })
		}
	}
}

// fakeStatic is a Static over a map of lowercase names, safe to change while
// served.
type fakeStatic struct {
	mu  sync.Mutex
	rrs map[string][]dns.RR
}

func (f *fakeStatic) Lookup(name string, qtype uint16) ([]dns.RR, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all, ok := f.rrs[name]
	var out []dns.RR
	for _, rr := range all {
		if rr.Header().Rrtype == qtype {
			out = append(out, rr)
		}
	}
	return out, ok
}

func (f *fakeStatic) set(t *testing.T, name string, rrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rrs[name] = nil
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		f.rrs[name] = append(f.rrs[name], rr)
	}
}

// TestStatic: names the Static source has are answered from it before
// forwarding (NODATA without SOA for other types, HINFO for ANY, owner case
// echoed, never cached); names of the cluster zone come from the zone.
func TestStatic(t *testing.T) {
	st := &fakeStatic{rrs: map[string][]dns.RR{}}
	st.set(t, "host.minikube.internal.", "host.minikube.internal. 0 IN A 192.168.49.1")
	st.set(t, "1.49.168.192.in-addr.arpa.", "1.49.168.192.in-addr.arpa. 0 IN PTR host.minikube.internal.")
	st.set(t, "web.prod.svc.cluster.local.", "web.prod.svc.cluster.local. 0 IN A 192.0.2.99")
	st.set(t, "10.0.96.10.in-addr.arpa.", "10.0.96.10.in-addr.arpa. 0 IN PTR wrong.example.")
	e, up := withForwarder(t, fixture, clusterdns.WithStatic(st), clusterdns.WithLoadBalance(true))
	cases := []struct {
		tcase
		upstream bool
	}{
		{tcase: tcase{name: "A", qname: "host.minikube.internal.", qtype: dns.TypeA,
			answer: []string{"host.minikube.internal. 0 IN A 192.168.49.1"}}},
		{tcase: tcase{name: "case echoed", qname: "HOST.Minikube.Internal.", qtype: dns.TypeA,
			answer: []string{"HOST.Minikube.Internal. 0 IN A 192.168.49.1"}}},
		{tcase: tcase{name: "other type is NODATA", qname: "host.minikube.internal.", qtype: dns.TypeAAAA}},
		{tcase: tcase{name: "ANY", qname: "host.minikube.internal.", qtype: dns.TypeANY,
			answer: []string{`host.minikube.internal. 0 IN HINFO "RFC8482" ""`}}},
		{tcase: tcase{name: "PTR", qname: "1.49.168.192.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"1.49.168.192.in-addr.arpa. 0 IN PTR host.minikube.internal."}}},
		{tcase: tcase{name: "zone first", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"web.prod.svc.cluster.local. 5 IN A 10.96.0.10"}}},
		{tcase: tcase{name: "snapshot reverse first", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"10.0.96.10.in-addr.arpa. 5 IN PTR web.prod.svc.cluster.local."}}},
		{tcase: tcase{name: "other names forwarded", qname: "www.example.org.", qtype: dns.TypeA,
			answer: []string{"www.example.org. 60 IN A 192.0.2.1"}}, upstream: true},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				before := up.Count()
				check(t, e, network, 0, tc.tcase)
				r := ask(t, network, e.addr, tc.qname, tc.qtype, 0)
				if len(r.Ns) != 0 && !strings.HasSuffix(tc.qname, "cluster.local.") {
					t.Errorf("authority %v, want none", r.Ns)
				}
				if !tc.upstream && !r.Authoritative {
					t.Errorf("AA not set")
				}
				if went := up.Count() != before; went != tc.upstream {
					t.Errorf("forwarded: %v, want %v", went, tc.upstream)
				}
			})
		}
	}
	// A change of the source is served at once: nothing was cached.
	st.set(t, "host.minikube.internal.", "host.minikube.internal. 0 IN A 192.168.49.2", "host.minikube.internal. 0 IN A 192.168.49.3")
	r := ask(t, "udp", e.addr, "host.minikube.internal.", dns.TypeA, 0)
	if got := rrStrings(r.Answer); !slices.Equal(got, []string{"host.minikube.internal. 0 IN A 192.168.49.2", "host.minikube.internal. 0 IN A 192.168.49.3"}) {
		t.Fatalf("after the change: %v", got)
	}
	// Resolve (autopath's entry point) answers from it too.
	res := e.h.Resolve(context.Background(), dns.Question{Name: "host.minikube.internal.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if res.Rcode != dns.RcodeSuccess || len(res.Answer) != 2 || res.Forwarded {
		t.Fatalf("Resolve: %+v", res)
	}
}

// TestTruncationClientSizes completes TestConformanceTruncation: the
// 55-byte query of the issue, client sizes between 512 and 1232 and below
// 512, and TCP with EDNS0.
func TestTruncationClientSizes(t *testing.T) {
	e := start(t, store.Options{TTL: 5}, bigHeadless(t, 1000))
	const name = "big.prod.svc.cluster.local."
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	q.SetEdns0(4096, false)
	if b, _ := q.Pack(); len(b) != 55 {
		t.Fatalf("query of %d bytes, want the issue's 55", len(b))
	}
	for _, tc := range []struct {
		edns  uint16
		limit int
	}{{100, 512}, {511, 512}, {800, 800}, {1000, 1000}, {1231, 1231}, {1233, 1232}} {
		t.Run(fmt.Sprintf("udp edns %d", tc.edns), func(t *testing.T) {
			r, n := askRaw(t, e.addr, name, dns.TypeA, tc.edns)
			if !r.Truncated || len(r.Answer) == 0 {
				t.Fatalf("TC=%v answers=%d, want TC and a partial answer", r.Truncated, len(r.Answer))
			}
			if n > tc.limit || n < tc.limit-16 {
				t.Errorf("%d-byte reply, want at most %d and within one record of it", n, tc.limit)
			}
		})
	}
	t.Run("tcp edns 1232", func(t *testing.T) {
		r := ask(t, "tcp", e.addr, name, dns.TypeA, 1232)
		if r.Truncated || len(r.Answer) != 1000 || r.IsEdns0() == nil {
			t.Fatalf("TC=%v answers=%d opt=%v, want the whole answer", r.Truncated, len(r.Answer), r.IsEdns0())
		}
	})
}

// TestNoForwarderRefused: without a forwarder, names of no zone of the
// server are REFUSED (not SERVFAIL: nothing failed), over UDP and TCP.
func TestNoForwarderRefused(t *testing.T) {
	e := start(t, store.Options{TTL: 5}, "testdata/objects")
	for _, network := range []string{"udp", "tcp"} {
		for _, name := range []string{"example.org.", "web.search.prod.cluster.local.ap.k8s.io."} {
			if r := ask(t, network, e.addr, name, dns.TypeA, 0); r.Rcode != dns.RcodeRefused || r.RecursionAvailable {
				t.Errorf("%s %s: %v, want REFUSED without RA", network, name, r)
			}
		}
	}
}

// TestDelegations: a forward route for a zone inside the cluster domain
// (another cluster's namespace) takes its names before the zone answers
// them, as a CoreDNS server block for that zone does; the rest of the zone
// is still answered locally, and without the delegation the name is the
// zone's NXDOMAIN.
func TestDelegations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delegated []string
		qname     string
		rcode     int
		answer    string // the A record's address, "" for none
		forwarded int
	}{
		{"delegated name", []string{"paris.svc.cluster.local"}, "web.paris.svc.cluster.local.", dns.RcodeSuccess, "192.0.2.1", 1},
		{"delegated apex", []string{"paris.svc.cluster.local."}, "paris.svc.cluster.local.", dns.RcodeSuccess, "192.0.2.1", 1},
		{"zone name beside it", []string{"paris.svc.cluster.local"}, "db.prod.svc.cluster.local.", dns.RcodeSuccess, "", 0},
		{"not delegated", nil, "web.paris.svc.cluster.local.", dns.RcodeNameError, "", 0},
		{"outside the zone ignored", []string{"example.org"}, "db.prod.svc.cluster.local.", dns.RcodeSuccess, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, up := withForwarder(t, fixture, clusterdns.WithDelegations(tc.delegated))
			r := ask(t, "udp", e.addr, tc.qname, dns.TypeA, 0)
			if r.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
			if tc.answer != "" && (len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != tc.answer) {
				t.Errorf("answer %v, want the upstream's %s", r.Answer, tc.answer)
			}
			if n := up.Count(); n != tc.forwarded {
				t.Errorf("%d queries reached the upstream, want %d", n, tc.forwarded)
			}
		})
	}
}
