package clusterdns

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// TestMissWireIsServeDNS: a query for a name of the zone that does not
// exist is answered from the wire with the bytes ServeDNS sends for it
// (ID, RD, CD, the question's case, the SOA compressed as miekg/dns
// compresses it, OPT), and counted in the namespace metrics as ServeDNS
// counts it; nothing is asked upstream.
func TestMissWireIsServeDNS(t *testing.T) {
	names := []string{
		"nope.ns.svc.cluster.local.", "web.ns.svc.cluster.local.ns.svc.cluster.local.",
		"Foo.NS.svc.Cluster.Local.", "foo.Cluster.local.", "foo.cluster.Local.",
		"www.example.com.ns.svc.cluster.local.", "www.example.com.svc.cluster.local.", "www.example.com.cluster.local.",
		"x.dns.cluster.local.", "ns.dns.cluster.local.x.cluster.local.", "a.hostmaster.cluster.local.",
		"hostmaster.cluster.local.", "web.other.svc.cluster.local.", "_http._tcp.nope.ns.svc.cluster.local.",
	}
	for _, name := range names {
		for _, tc := range []struct {
			qtype      uint16
			rd, cd, do bool
			size       uint16
		}{{dns.TypeA, true, false, false, 0}, {dns.TypeAAAA, false, true, false, 1232}, {dns.TypeSRV, true, false, true, 4096}, {dns.TypeANY, true, false, false, 100}} {
			for _, fwd := range []bool{false, true} {
				wireIsServeDNS(t, wireQuery(name, tc.qtype, tc.rd, tc.cd, tc.size, tc.do), fwd)
			}
		}
	}
}

// wireIsServeDNS fails t unless req is answered from the wire with the
// bytes ServeDNS sends for it, and counted alike in the namespace metrics,
// with a forwarder or without.
func wireIsServeDNS(t *testing.T, req *dns.Msg, fwd bool) {
	t.Helper()
	opts := []Option{WithWireMisses()}
	if fwd {
		opts = append(opts, WithForwarder(&upstreamStub{}))
	}
	// One store: two would differ in their SOA serials when built on
	// either side of a second.
	st := fuzzStore(t)
	ampA, _ := nsmetrics.New(5, "cluster.local", st)
	ampB, _ := nsmetrics.New(5, "cluster.local", st)
	ha := NewHandler("cluster.local", st, append(opts, WithAmplification(ampA))...)
	hb := NewHandler("cluster.local", st, append(opts, WithAmplification(ampB))...)
	q := req.Question[0]
	got, ok := ha.AnswerWire(nil, mustPack(t, req))
	if !ok {
		t.Fatalf("%s %d: not answered from the wire", q.Name, q.Qtype)
	}
	want := serveUDP(t, hb, req)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s %d class %d (forwarder %v): reply differs from ServeDNS's:\n got %x\nwant %x", q.Name, q.Qtype, q.Qclass, fwd, got, want)
	}
	if a, b := gatherText(t, ampA), gatherText(t, ampB); a != b {
		t.Fatalf("%s: namespace metrics differ:\nwire %s\nServeDNS %s", q.Name, a, b)
	}
}

// TestAddrWireIsServeDNS: an A or AAAA query for a name with one address
// of that type (a ClusterIP Service, a one-endpoint headless Service, an
// endpoint) is answered from the wire with the bytes ServeDNS sends
// (ID, RD, CD, the question's case, the owner compressed to it, the TTL,
// OPT), and counted in the namespace metrics as ServeDNS counts it.
func TestAddrWireIsServeDNS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		qtype uint16
	}{
		{"web.ns.svc.cluster.local.", dns.TypeA}, {"WEB.Ns.svc.Cluster.LOCAL.", dns.TypeA},
		{"hl.ns.svc.cluster.local.", dns.TypeA}, {"hl.ns.svc.cluster.local.", dns.TypeAAAA},
		{"a.hl.ns.svc.cluster.local.", dns.TypeA}, {"A.HL.ns.svc.cluster.local.", dns.TypeA},
	} {
		for _, bits := range []struct {
			rd, cd, do bool
			size       uint16
			class      uint16
		}{{true, false, false, 0, dns.ClassINET}, {false, true, false, 1232, dns.ClassINET}, {true, true, true, 4096, dns.ClassANY}} {
			for _, fwd := range []bool{false, true} {
				req := wireQuery(tc.name, tc.qtype, bits.rd, bits.cd, bits.size, bits.do)
				req.Question[0].Qclass = bits.class
				wireIsServeDNS(t, req, fwd)
			}
		}
	}
}

// gatherText is what c exports, as text.
func gatherText(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := testkit.Registry(t, c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		b.WriteString(mf.String())
	}
	return b.String()
}

// TestMissWireLeftToServeDNS: names that exist, names ServeDNS answers
// otherwise (delegated, insecure pods, rewritten) and queries before the
// first sync are not answered by the miss path.
func TestMissWireLeftToServeDNS(t *testing.T) {
	rw, err := WithRewrites([]v1alpha1.Rewrite{{From: "db.example.com", To: "web.ns.svc.cluster.local"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		qname string
		qtype uint16
		opts  []Option
	}{
		{"existing, SRV", "_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV, nil},
		{"existing, ANY", "web.ns.svc.cluster.local.", dns.TypeANY, nil},
		{"NODATA", "web.ns.svc.cluster.local.", dns.TypeTXT, nil},
		{"NODATA AAAA", "web.ns.svc.cluster.local.", dns.TypeAAAA, nil},
		{"alias", "loop1.ns.svc.cluster.local.", dns.TypeA, nil},
		{"two addresses", "two.ns.svc.cluster.local.", dns.TypeA, nil},
		{"PTR", "1.0.0.10.in-addr.arpa.", dns.TypePTR, nil},
		{"empty non-terminal", "svc.cluster.local.", dns.TypeA, nil},
		{"apex", "cluster.local.", dns.TypeA, nil},
		{"insecure pod", "10-0-0-9.ns.pod.cluster.local.", dns.TypeA, nil},
		{"delegated", "x.paris.svc.cluster.local.", dns.TypeA, []Option{WithForwarder(&upstreamStub{}), WithDelegations([]string{"paris.svc.cluster.local"})}},
		{"rewrites", "nope.ns.svc.cluster.local.", dns.TypeA, []Option{rw}},
		{"class CH", "nope.ns.svc.cluster.local.", dns.TypeA, nil},
		{"without WithWireMisses", "nope.ns.svc.cluster.local.", dns.TypeA, nil},
		{"AXFR", "nope.ns.svc.cluster.local.", dns.TypeAXFR, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if tc.name != "without WithWireMisses" {
				opts = append(opts, WithWireMisses())
			}
			st := fuzzStore(t)
			st.SetService(store.Service{Namespace: "ns", Name: "two", Type: store.Headless})
			st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "two-1", Service: "two",
				Endpoints: []store.Endpoint{{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.7")}, Ready: true},
					{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.8")}, Ready: true}}})
			st.Publish()
			h := NewHandler("cluster.local", st, opts...)
			req := wireQuery(tc.qname, tc.qtype, true, false, 0, false)
			if tc.name == "class CH" {
				req.Question[0].Qclass = dns.ClassCHAOS
			}
			if b, ok := h.AnswerWire(nil, mustPack(t, req)); ok {
				m := new(dns.Msg)
				_ = m.Unpack(b)
				t.Fatalf("answered from the wire: %v", m)
			}
		})
	}
}

// BenchmarkMissWire: an NXDOMAIN of the zone, and a ClusterIP Service's
// address, answered from the wire past the reply cache, as the listener
// asks (allocations per answer), with the namespace metrics on, as serve
// runs.
func BenchmarkMissWire(b *testing.B) {
	st := fuzzStore(b)
	amp, _ := nsmetrics.New(20, "cluster.local", st)
	h := NewHandler("cluster.local", st, WithAmplification(amp), WithWireMisses())
	for _, name := range []string{"api.example.com.ns.svc.cluster.local.", "web.ns.svc.cluster.local."} {
		b.Run(strings.SplitN(name, ".", 2)[0], func(b *testing.B) {
			q, _ := wireQuery(name, dns.TypeA, true, false, 0, false).Pack()
			benchWire(b, h, q)
		})
	}
}

// FuzzMissWire: whatever the query, a reply of the miss path is the reply
// ServeDNS sends, byte for byte, and the namespace metrics count alike.
func FuzzMissWire(f *testing.F) {
	f.Add("nope.ns.svc.cluster.local.", uint16(dns.TypeA), uint8(0), uint16(0))
	f.Add("A.dns.Cluster.local.", uint16(dns.TypeANY), uint8(3), uint16(1232))
	f.Add("x.hostmaster.cluster.local.cluster.local.", uint16(dns.TypeSRV), uint8(5), uint16(100))
	f.Add("10-0-0-9.ns.pod.cluster.local.", uint16(dns.TypeA), uint8(1), uint16(4096))
	f.Add("Web.ns.svc.cluster.local.", uint16(dns.TypeA), uint8(7), uint16(512))
	f.Add("a.HL.ns.svc.cluster.local.", uint16(dns.TypeAAAA), uint8(2), uint16(0))
	f.Fuzz(func(t *testing.T, name string, qtype uint16, bits uint8, size uint16) {
		if _, ok := dns.IsDomainName(name); !ok {
			return
		}
		req := wireQuery(dns.Fqdn(name), qtype, bits&1 != 0, bits&2 != 0, size, bits&4 != 0)
		q, err := req.Pack()
		if err != nil {
			return
		}
		st := fuzzStore(t) // one store, one SOA serial
		ampA, _ := nsmetrics.New(5, "cluster.local", st)
		ampB, _ := nsmetrics.New(5, "cluster.local", st)
		ha := NewHandler("cluster.local", st, WithWireMisses(), WithAmplification(ampA))
		hb := NewHandler("cluster.local", st, WithAmplification(ampB))
		got, ok := ha.AnswerWire(nil, q)
		if !ok {
			return
		}
		// ServeDNS gets the query as the server unpacks it from the wire:
		// the name's presentation form may differ from the one packed
		// (the escaped "0.Cluste\r.loCAl" packs as "0.Cluster.loCAl").
		var in dns.Msg
		if err := in.Unpack(q); err != nil {
			t.Fatalf("%q: unpack the packed query: %v", name, err)
		}
		w := &fakeWriter{}
		hb.ServeDNS(w, &in)
		if !bytes.Equal(got, w.wire) {
			t.Fatalf("%q %d: reply differs from ServeDNS's:\n got %x\nwant %x", name, qtype, got, w.wire)
		}
		if a, b := gatherText(t, ampA), gatherText(t, ampB); a != b {
			t.Fatalf("%q: namespace metrics differ:\nwire %s\nServeDNS %s", name, a, b)
		}
	})
}

// TestMissWireAllocs: the miss path answers a long name (over the 32 bytes
// a string conversion may keep on the stack), and an existing name's one
// address, and counts them in the namespace metrics without allocating.
func TestMissWireAllocs(t *testing.T) {
	st := fuzzStore(t)
	amp, err := nsmetrics.New(5, "cluster.local", st)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler("cluster.local", st, WithWireMisses(), WithAmplification(amp))
	for _, name := range []string{"www.example.com.ns.svc.cluster.local.", "web.ns.svc.cluster.local.ns.svc.cluster.local.", "WEB.ns.svc.cluster.local."} {
		q := mustPack(t, wireQuery(name, dns.TypeA, true, false, 1232, false))
		dst := make([]byte, 0, 512)
		if _, ok := h.AnswerWire(dst, q); !ok {
			t.Fatalf("%s: not answered from the wire", name)
		}
		if allocs := testing.AllocsPerRun(100, func() { h.AnswerWire(dst, q) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per miss, want 0", name, allocs)
		}
	}
}
