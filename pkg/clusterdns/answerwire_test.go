package clusterdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics/nsmetricstest"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// wireQuery is a query for name/qtype with the given header bits and,
// when size > 0, an OPT of that size with the DO bit.
func wireQuery(name string, qtype uint16, rd, cd bool, size uint16, do bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	m.RecursionDesired, m.CheckingDisabled = rd, cd
	if size > 0 {
		m.SetEdns0(size, do)
	}
	return m
}

func mustPack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveUDP is ServeDNS's reply to req from a UDP client, in wire form.
func serveUDP(t *testing.T, h *Handler, req *dns.Msg) []byte {
	t.Helper()
	w := &fakeWriter{}
	h.ServeDNS(w, req)
	if w.wire == nil || w.err != nil {
		t.Fatalf("ServeDNS %v: no reply (%v)", req.Question, w.err)
	}
	return w.wire
}

// TestAnswerWireIsServeDNSHit: the cluster handler answers from the wire
// form exactly the queries whose reply ServeDNS has cached, with the bytes
// ServeDNS sends for them (ID, RD, CD, case, OPT and truncation included),
// and leaves every other query to ServeDNS.
func TestAnswerWireIsServeDNSHit(t *testing.T) {
	h := NewHandler("cluster.local", fuzzStore(t))
	cookie := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 1232, false)
	cookie.IsEdns0().Option = append(cookie.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	cached := []struct {
		name string
		req  *dns.Msg
	}{
		{"A", wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)},
		{"A rd off", wireQuery("web.ns.svc.cluster.local.", dns.TypeA, false, false, 0, false)},
		{"A cd on", wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, true, 0, false)},
		{"A mixed case", wireQuery("WeB.Ns.svc.CLUSTER.local.", dns.TypeA, true, false, 0, false)},
		{"A edns do", wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 1232, true)},
		{"A edns cookie", cookie},
		{"NXDOMAIN search miss", wireQuery("web.ns.svc.cluster.local.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)},
		{"NXDOMAIN edns", wireQuery("www.example.com.ns.svc.cluster.local.", dns.TypeAAAA, true, false, 4096, false)},
		{"NODATA", wireQuery("web.ns.svc.cluster.local.", dns.TypeAAAA, true, false, 0, false)},
		{"SRV headless", wireQuery("_http._tcp.hl.ns.svc.cluster.local.", dns.TypeSRV, true, false, 0, false)},
		{"SRV small edns", wireQuery("_http._tcp.hl.ns.svc.cluster.local.", dns.TypeSRV, true, false, 100, false)},
		{"zone apex SOA", wireQuery("cluster.local.", dns.TypeSOA, true, false, 0, false)},
	}
	for _, tc := range cached {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler("cluster.local", fuzzStore(t))
			q := mustPack(t, tc.req)
			if _, ok := h.AnswerWire(nil, q); ok {
				t.Fatal("answered before ServeDNS cached the reply")
			}
			want := serveUDP(t, h, tc.req)
			got, ok := h.AnswerWire(make([]byte, 0, 512), q)
			if !ok {
				t.Fatal("not answered from the wire after ServeDNS cached the reply")
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("reply differs from ServeDNS's:\n got %x\nwant %x", got, want)
			}
			// Another ID gets its own.
			tc.req.Id = 0xbeef
			q = mustPack(t, tc.req)
			got, _ = h.AnswerWire(nil, q)
			if got[0] != 0xbe || got[1] != 0xef || !bytes.Equal(got[2:], want[2:]) {
				t.Fatalf("reply to ID 0xbeef: %x", got[:4])
			}
		})
	}

	// The same question with another shape is another cache entry.
	t.Run("other size", func(t *testing.T) {
		serveUDP(t, h, wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 1232, false))
		if _, ok := h.AnswerWire(nil, mustPack(t, wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 800, false))); ok {
			t.Fatal("a reply cached for 1232 bytes answered a client of 800")
		}
	})

	// Queries left to ServeDNS however often ServeDNS has answered them.
	bad := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 1232, false)
	bad.IsEdns0().SetVersion(1)
	response := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)
	response.Response = true
	notify := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)
	notify.Opcode = dns.OpcodeNotify
	for _, tc := range []struct {
		name string
		req  *dns.Msg
	}{
		{"EDNS version 1", bad},
		{"response", response},
		{"NOTIFY", notify},
		{"outside the zone, no forwarder (REFUSED)", wireQuery("example.org.", dns.TypeA, true, false, 0, false)},
		{"AXFR", wireQuery("cluster.local.", dns.TypeAXFR, true, false, 0, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := mustPack(t, tc.req)
			if !tc.req.Response {
				serveUDP(t, h, tc.req)
				serveUDP(t, h, tc.req)
			}
			if b, ok := h.AnswerWire(nil, q); ok {
				t.Fatalf("answered from the wire: %x", b)
			}
		})
	}

	t.Run("new snapshot", func(t *testing.T) {
		req := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)
		serveUDP(t, h, req)
		st := h.records.(*store.Store)
		st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}})
		st.Publish()
		if _, ok := h.AnswerWire(nil, mustPack(t, req)); ok {
			t.Fatal("answered from the previous snapshot's cache")
		}
		want := serveUDP(t, h, req)
		got, ok := h.AnswerWire(nil, mustPack(t, req))
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("after the new snapshot: %v %x, want %x", ok, got, want)
		}
	})
}

// TestAnswerWireBySource: while autopath answers by source address, no
// query is answered from the wire form (the reply depends on the client,
// which AnswerWire does not see).
func TestAnswerWireBySource(t *testing.T) {
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler("cluster.local", fuzzStore(t), ap, WithAutopathBySource())
	req := wireQuery("web.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)
	serveUDP(t, h, req)
	serveUDP(t, h, req)
	if _, ok := h.AnswerWire(nil, mustPack(t, req)); ok {
		t.Fatal("answered from the wire with autopath by source on")
	}
}

// TestAnswerWireLoadBalance: the wire answers and ServeDNS's cache hits
// share one rotation: successive hits, whichever path answers them, start
// at successive records.
func TestAnswerWireLoadBalance(t *testing.T) {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	var eps []store.Endpoint
	for i := range 3 {
		eps = append(eps, store.Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)})}, Ready: true})
	}
	st.SetService(store.Service{Namespace: "ns", Name: "hl", Type: store.Headless})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "hl-1", Service: "hl", Endpoints: eps})
	st.Publish()
	h := NewHandler("cluster.local", st, WithLoadBalance(true))
	req := wireQuery("hl.ns.svc.cluster.local.", dns.TypeA, true, false, 0, false)
	q := mustPack(t, req)
	first := func(b []byte) string {
		t.Helper()
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil || len(m.Answer) != 3 {
			t.Fatalf("reply %v (%v)", m, err)
		}
		return m.Answer[0].(*dns.A).A.String()
	}
	serveUDP(t, h, req) // the miss that fills the cache
	seen := map[string]int{}
	for i := range 6 {
		var b []byte
		if i%2 == 0 {
			var ok bool
			if b, ok = h.AnswerWire(nil, q); !ok {
				t.Fatalf("hit %d: not answered from the wire", i)
			}
		} else {
			b = serveUDP(t, h, req)
		}
		seen[first(b)]++
	}
	if len(seen) != 3 || seen["10.1.0.1"] != 2 || seen["10.1.0.2"] != 2 || seen["10.1.0.3"] != 2 {
		t.Fatalf("first records over 6 hits: %v, want each of 3 twice", seen)
	}
}

// TestAnswerWireAmplification: a wire answer counts in the namespace
// metrics as the ServeDNS cache hit it replaces.
func TestAnswerWireAmplification(t *testing.T) {
	h, a := newAmpHandler(t, nsmetricstest.Store(t, "prod"), 10)
	req := wireQuery("web.prod.svc.cluster.local.prod.svc.cluster.local.", dns.TypeA, true, false, 0, false)
	serveUDP(t, h, req)
	before := rawCounts(a, "prod")
	serveUDP(t, h, req)
	afterServe := rawCounts(a, "prod")
	if _, ok := h.AnswerWire(nil, mustPack(t, req)); !ok {
		t.Fatal("not answered from the wire")
	}
	afterWire := rawCounts(a, "prod")
	for i := range before {
		if d1, d2 := afterServe[i]-before[i], afterWire[i]-afterServe[i]; d1 != d2 {
			t.Fatalf("counter %d: ServeDNS hit added %d, wire answer %d (%v → %v → %v)", i, d1, d2, before, afterServe, afterWire)
		}
	}
	if afterWire == afterServe {
		t.Fatalf("the wire answer counted nothing: %v", afterWire)
	}
}

// BenchmarkAnswerWire is BenchmarkServeDNS's cached queries answered from
// their wire form, as the server's UDP reader does.
func BenchmarkAnswerWire(b *testing.B) {
	for _, bc := range []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"A", "web.ns.svc.cluster.local.", dns.TypeA},
		{"NXDOMAIN", "web.ns.svc.cluster.local.ns.svc.cluster.local.", dns.TypeA},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := NewHandler("cluster.local", fuzzStore(b))
			req := wireQuery(bc.qname, bc.qtype, true, false, 0, false)
			h.ServeDNS(&benchWriter{}, req)
			q, _ := req.Pack()
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := h.AnswerWire(dst, q); !ok {
					b.Fatal("miss")
				}
			}
		})
	}
}

// TestReplyCacheBound: WithReplyCache bounds the packed replies a snapshot
// keeps: past the bound the oldest one-off replies are dropped (and asked
// again go to ServeDNS), while the default keeps them all. A cache of the
// same bound given by withReplies holds at most its bound.
func TestReplyCacheBound(t *testing.T) {
	const bound = 64 << 10
	small := NewHandler("cluster.local", fuzzStore(t), WithReplyCache(bound))
	rc := replycache.New[*reply](bound, replyIdle)
	given := NewHandler("cluster.local", fuzzStore(t), withReplies(rc))
	def := NewHandler("cluster.local", fuzzStore(t))
	name := func(i int) string { return fmt.Sprintf("n%d.ns.svc.cluster.local.", i) }
	for i := range 2000 { // about 250 bytes each: 500 KB
		req := wireQuery(name(i), dns.TypeA, true, false, 0, false)
		serveUDP(t, small, req)
		serveUDP(t, given, req)
		serveUDP(t, def, req)
	}
	first := mustPack(t, wireQuery(name(0), dns.TypeA, true, false, 0, false))
	last := mustPack(t, wireQuery(name(1999), dns.TypeA, true, false, 0, false))
	for _, h := range []*Handler{small, given} {
		if _, ok := h.AnswerWire(nil, first); ok {
			t.Error("the first of 2000 replies is still cached under a 64 KiB bound")
		}
		if _, ok := h.AnswerWire(nil, last); !ok {
			t.Error("the last reply is not cached under a 64 KiB bound")
		}
	}
	if _, ok := def.AnswerWire(nil, first); !ok {
		t.Error("the first of 2000 replies was dropped under the default bound")
	}
	if held := rc.Bytes(); held > bound+512 {
		t.Errorf("the cache holds %d bytes, bound %d", held, bound)
	}
}

// TestAnswerWireServer: behind a real Server on loopback, the reply
// ServeDNS cached answers every later UDP query for the question from its
// wire form (ServeDNS is not called, the reply is the same), from the very
// next query on; TCP and other questions reach ServeDNS.
func TestAnswerWireServer(t *testing.T) {
	c := &testkit.Counting{WireHandler: NewHandler("cluster.local", fuzzStore(t))}
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: c}
	addr := testkit.StartServer(t, srv)
	ask := func(network, name string) *dns.Msg {
		t.Helper()
		return testkit.Ask(t, network, addr, wireQuery(name, dns.TypeA, true, false, 1232, false))
	}
	first := ask("udp", "web.ns.svc.cluster.local.") // the miss, cached
	for range 20 {
		r := ask("udp", "web.ns.svc.cluster.local.")
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].String() != first.Answer[0].String() || r.IsEdns0() == nil {
			t.Fatalf("wire answer %v, first answer %v", r, first)
		}
	}
	if n := c.Served(); n != 1 {
		t.Fatalf("ServeDNS served %d queries, want 1: the cached ones are wire answers", n)
	}
	ask("tcp", "web.ns.svc.cluster.local.")
	ask("udp", "nx.ns.svc.cluster.local.")
	if n := c.Served(); n != 3 {
		t.Fatalf("ServeDNS served %d queries, want 3 (TCP and a miss)", n)
	}
}

// withReplies sets the reply cache; tests keep a typed handle on it.
func withReplies(c replyCache) Option { return func(h *Handler) { h.wire = c } }
