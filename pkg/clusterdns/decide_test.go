package clusterdns

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
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
		WithDelegations([]string{"paris.svc.cluster.local"}), WithExternal([]string{"example.org"}, "dns", 5, false)}
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
		{"external zone, missing", wireQuery("web.ns.example.org.", dns.TypeA, true, false, 0, false), false, routeExternal, dns.RcodeNameError, 0, true, false},
		{"external apex", wireQuery("EXAMPLE.org.", dns.TypeSOA, true, false, 0, false), false, routeExternal, dns.RcodeSuccess, 1, true, false},
		{"EDNS, DO", wireQuery(web, dns.TypeA, true, true, 1232, true), false, routeZone, dns.RcodeSuccess, 1, true, true},
		{"EDNS, forwarded", wireQuery("www.example.com.", dns.TypeA, false, false, 1232, false), false, routeForward, dns.RcodeSuccess, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := base
			if tc.rw {
				opts = append(opts[:len(opts):len(opts)], rw)
			}
			h, _, _, _ := forwardingHandler(t, opts...)
			packed := mustPack(t, tc.req)

			// One query: admit on the message as ServeDNS has it, admitWire
			// on the bytes as AnswerWire has them, make the same lowercase
			// name and cache key; decide on each makes one decision.
			q := tc.req.Question[0]
			var mq, wq query
			h.admit(&mq, udpFrom, tc.req.Copy())
			dst := make([]byte, 0, 512)
			if !h.admitWire(&wq, dst, packed) {
				t.Fatal("admitWire refused the query")
			}
			if mq.lower() != wq.lowerWire() || mq.key != wq.key || !mq.cacheable || !wq.cacheable {
				t.Fatalf("admitted apart: message %q %+v, wire %q %+v", mq.lname, mq.key, wq.lname, wq.key)
			}
			text := decide(h, mq.z, q.Qtype, q.Qclass, mq.lname)
			wire := decide(h, wq.z, wq.wire.Qtype, wq.wire.Qclass, wq.lname)
			if text.route != wire.route || text.rewrite != wire.rewrite || text.ra != wire.ra || len(text.rrs) != len(wire.rrs) {
				t.Fatalf("decisions differ: text %+v, wire %+v", text, wire)
			}
			if text.rewrite != tc.rw && text.route != routeRefused && text.route != routeAutopath {
				t.Errorf("rewrite %v, want %v", text.rewrite, tc.rw)
			}
			route := text.route
			if text.rewrite {
				if rv, _ := h.rw.rewrite(mq.lname); rv != nil {
					route = decide(h, mq.z, q.Qtype, q.Qclass, rv.name()).route
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
			b, ok := h.AnswerWire(make([]byte, 0, 512), packed)
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

// udpFrom is a client address of the tests' queries.
var udpFrom = &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 5353}

// TestDecideAgreesAdmit: admit places the client once and the other paths
// agree with it. A name with variants gets the client's variant (by its
// source, or by its topology option) in its cache key, and admitWire
// leaves it to ServeDNS; a first search step of a known pod is answered
// by source, never cached, and admitWire leaves every query to ServeDNS
// while autopath answers by source; a name of neither is keyed as asked.
func TestDecideAgreesAdmit(t *testing.T) {
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	const web, db = "web.ns.svc.cluster.local.", "db.ns.svc.cluster.local."
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 5353} // on n1, in za
	withZone := func(name, zone string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.SetEdns0(1232, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: 65000, Data: topology.Encode(topology.Client{Zone: zone})})
		return m
	}
	snap := topoSnapshot(t)
	for _, tc := range []struct {
		name      string
		bySource  bool // the handler answers by source
		src       net.Addr
		req       *dns.Msg
		variant   store.Variant // the client's variant of the name
		answered  bool          // admit marks it answered by source
		cacheable bool
		wire      bool // admitWire takes it
	}{
		{"variants, by source", false, pod, wireQuery(web, dns.TypeA, true, false, 0, false), snap.VariantFor(web, "za", "n1"), false, true, false},
		{"variants, by option", false, udpFrom, withZone(web, "zb"), snap.VariantFor(web, "zb", ""), false, true, false},
		{"variants, unknown client", false, udpFrom, wireQuery(web, dns.TypeA, true, false, 0, false), "", false, true, false},
		{"no variants", false, pod, wireQuery(db, dns.TypeA, true, false, 0, false), "", false, true, true},
		{"first search step of a pod", true, pod, wireQuery("db.ns.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false), "", true, false, false},
		{"first search step, unknown client", true, udpFrom, wireQuery("db.ns.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false), "", false, true, false},
		{"another namespace's step", true, pod, wireQuery("db.other.svc.cluster.local.", dns.TypeA, true, false, 0, false), "", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{ap, WithTopology(65000)}
			if tc.bySource {
				opts = append(opts, WithAutopathBySource())
			}
			h := NewHandler("cluster.local", snapRecords{snap}, opts...)
			packed := mustPack(t, tc.req)
			var q query
			h.admit(&q, tc.src, tc.req.Copy())
			if q.client.variant != tc.variant || q.bySource != tc.answered || q.cacheable != tc.cacheable {
				t.Fatalf("admit: variant %q, by source %v, cacheable %v; want %q, %v, %v",
					q.client.variant, q.bySource, q.cacheable, tc.variant, tc.answered, tc.cacheable)
			}
			if tc.cacheable && q.key.Name != tc.req.Question[0].Name+string(tc.variant) {
				t.Errorf("key %q, want the name as asked and the variant", q.key.Name)
			}
			var wq query
			if ok := h.admitWire(&wq, make([]byte, 0, 512), packed); ok != tc.wire {
				t.Errorf("admitWire took it: %v, want %v", ok, tc.wire)
			}
			if tc.answered {
				if ns, ok := h.ap.firstStep(q.z, q.client.ip, q.lower()); !ok || ns != "ns" {
					t.Errorf("firstStep: %q, %v", ns, ok)
				}
			}
		})
	}
}

func withClass(m *dns.Msg, class uint16) *dns.Msg {
	m.Question[0].Qclass = class
	return m
}
