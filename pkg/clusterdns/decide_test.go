package clusterdns

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// TestDecideAgrees: for each shape of query, the wire paths and ServeDNS
// make one decision (decide on the name's bytes and on its text) and send
// one reply: what AnswerWire answers is ServeDNS's reply byte for byte,
// and that reply has the rcode, answer and AA the decision implies.
func TestDecideAgrees(t *testing.T) {
	rw, err := WithRewrites([]v1alpha1.Rewrite{{From: "db.example.com", To: "web.ns.svc.cluster.local"}})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := WithReverseZones([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	base := []Option{ap, rev, WithWireMisses(), WithStatic(staticMap{"hosts.example.com.": true}),
		WithDelegations([]string{"paris.svc.cluster.local"})}
	const web = "web.ns.svc.cluster.local."
	for _, tc := range []struct {
		name   string
		req    *dns.Msg
		rw     bool // with the rewrite db.example.com -> web
		route  route
		rcode  int
		answer int
		aa     bool
		wire   bool // AnswerWire answers it (after ServeDNS did twice)
	}{
		{"IN", wireQuery(web, dns.TypeA, true, false, 0, false), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"class CH", withClass(wireQuery(web, dns.TypeA, true, false, 0, false), dns.ClassCHAOS), false, routeRefused, dns.RcodeRefused, 0, false, false},
		{"class ANY", withClass(wireQuery(web, dns.TypeA, true, false, 0, false), dns.ClassANY), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"AXFR", wireQuery("cluster.local.", dns.TypeAXFR, true, false, 0, false), false, routeRefused, dns.RcodeRefused, 0, false, false},
		{"IXFR", wireQuery("cluster.local.", dns.TypeIXFR, true, false, 0, false), false, routeRefused, dns.RcodeRefused, 0, false, false},
		{"AXFR outside", wireQuery("www.example.com.", dns.TypeAXFR, true, false, 0, false), false, routeRefused, dns.RcodeRefused, 0, false, false},
		{"type ANY", wireQuery(web, dns.TypeANY, true, false, 0, false), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"in the zone, missing", wireQuery("nope.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false), false, routeZone, dns.RcodeNameError, 0, true, true},
		{"SRV in the zone", wireQuery("_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV, true, false, 0, false), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"autopath suffix", wireQuery("web.search.ns.cluster.local.ap.k8s.io.", dns.TypeA, true, false, 0, false), false, routeAutopath, dns.RcodeSuccess, 2, true, false},
		{"delegated", wireQuery("x.paris.svc.cluster.local.", dns.TypeA, true, false, 0, false), false, routeForward, dns.RcodeSuccess, 1, false, true},
		{"reverse, known", wireQuery("1.0.0.10.in-addr.arpa.", dns.TypePTR, true, false, 0, false), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"reverse, ours, unknown", wireQuery("9.0.0.10.in-addr.arpa.", dns.TypePTR, true, false, 0, false), false, routeReverseAuth, dns.RcodeNameError, 0, true, true},
		{"reverse, not ours", wireQuery("9.9.9.9.in-addr.arpa.", dns.TypeA, true, false, 0, false), false, routeForward, dns.RcodeSuccess, 1, false, true},
		{"static", wireQuery("hosts.example.com.", dns.TypeA, true, false, 0, false), false, routeStatic, dns.RcodeSuccess, 1, true, false},
		{"rewritten", wireQuery("db.example.com.", dns.TypeA, true, false, 0, false), true, routeZone, dns.RcodeSuccess, 1, true, true},
		{"forwarded", wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), false, routeForward, dns.RcodeSuccess, 1, false, true},
		{"forwarded, with rewrites", wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), true, routeForward, dns.RcodeSuccess, 1, false, false},
		{"upper case", wireQuery("WEB.NS.svc.Cluster.LOCAL.", dns.TypeA, true, false, 0, false), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"upper case, missing", wireQuery("NOPE.ns.SVC.cluster.local.", dns.TypeAAAA, true, false, 0, false), false, routeZone, dns.RcodeNameError, 0, true, true},
		{"EDNS, DO", wireQuery(web, dns.TypeA, true, true, 1232, true), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"EDNS, forwarded", wireQuery("www.example.com.", dns.TypeA, false, false, 1232, false), false, routeForward, dns.RcodeSuccess, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := base
			if tc.rw {
				opts = append(opts[:len(opts):len(opts)], rw)
			}
			h, _, _, _ := forwardingHandler(t, opts...)
			query := mustPack(t, tc.req)

			// One decision: on the text as ServeDNS has it, on the bytes as
			// the wire paths have them.
			q := tc.req.Question[0]
			text := h.decideQ(q)
			wq, ok := dnsmsg.ParseQuery(query)
			if !ok {
				t.Fatal("ParseQuery refused the query")
			}
			wire := decide(h, wq.Qtype, wq.Qclass, dnsmsg.AppendName(nil, wq.Name, true))
			if text.route != wire.route || text.rewrite != wire.rewrite || text.ra != wire.ra || len(text.rrs) != len(wire.rrs) {
				t.Fatalf("decisions differ: text %+v, wire %+v", text, wire)
			}
			if text.rewrite != tc.rw && text.route != routeRefused && text.route != routeAutopath {
				t.Errorf("rewrite %v, want %v", text.rewrite, tc.rw)
			}
			route := text.route
			if text.rewrite {
				if name, rv, _ := h.rw.rewrite(q.Name); rv != nil {
					route = h.decideQ(dns.Question{Name: name, Qtype: q.Qtype, Qclass: q.Qclass}).route
				}
			}
			if route != tc.route {
				t.Errorf("route %d, want %d", route, tc.route)
			}

			// One reply.
			var served []byte
			for range 2 {
				w := &fakeWriter{}
				h.ServeDNS(w, tc.req.Copy())
				if w.err != nil || w.msg == nil {
					t.Fatalf("ServeDNS: %v", w.err)
				}
				served = w.wire
				if w.msg.Rcode != tc.rcode || len(w.msg.Answer) != tc.answer || w.msg.Authoritative != tc.aa {
					t.Fatalf("ServeDNS: rcode %d, %d answers, AA %v; want %d, %d, %v\n%v",
						w.msg.Rcode, len(w.msg.Answer), w.msg.Authoritative, tc.rcode, tc.answer, tc.aa, w.msg)
				}
			}
			b, ok := h.AnswerWire(make([]byte, 0, 512), query)
			if ok != tc.wire {
				t.Fatalf("answered from the wire: %v, want %v", ok, tc.wire)
			}
			if ok && !bytes.Equal(b, served) {
				var m dns.Msg
				_ = m.Unpack(b)
				t.Fatalf("the wire's reply is not ServeDNS's:\nwire %x\nServeDNS %x\n%v", b, served, &m)
			}
		})
	}
}

func withClass(m *dns.Msg, class uint16) *dns.Msg {
	m.Question[0].Qclass = class
	return m
}
