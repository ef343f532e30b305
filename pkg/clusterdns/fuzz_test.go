package clusterdns

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// fuzzStore is a small store: a ClusterIP Service, a headless one with a
// hostname endpoint, and an in-zone ExternalName chain.
func fuzzStore(tb testing.TB) *store.Store {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5, Pods: store.PodsInsecure})
	if err != nil {
		tb.Fatal(err)
	}
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.ClusterIP, ClusterIPs: ip("10.0.0.1"),
		Ports: []store.Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	st.SetService(store.Service{Namespace: "ns", Name: "hl", Type: store.Headless})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "hl-1", Service: "hl",
		Ports:     []store.Port{{Name: "http", Protocol: "tcp", Port: 80}},
		Endpoints: []store.Endpoint{{Addresses: ip("10.1.0.1"), Hostname: "a", Ready: true}, {Addresses: ip("fd00::1"), Ready: true}}})
	st.SetService(store.Service{Namespace: "ns", Name: "loop1", Type: store.ExternalName, ExternalName: "loop2.ns.svc.cluster.local."})
	st.SetService(store.Service{Namespace: "ns", Name: "loop2", Type: store.ExternalName, ExternalName: "loop1.ns.svc.cluster.local."})
	st.Publish()
	return st
}

// fakeWriter is a dns.ResponseWriter that keeps the reply.
type fakeWriter struct {
	tcp  bool
	msg  *dns.Msg
	wire []byte
	err  error
}

func (w *fakeWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *fakeWriter) RemoteAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}
}
func (w *fakeWriter) WriteMsg(m *dns.Msg) error { w.msg = m; _, err := m.Pack(); return err }
func (w *fakeWriter) Write(b []byte) (int, error) {
	w.wire = append([]byte(nil), b...)
	w.msg = new(dns.Msg)
	w.err = w.msg.Unpack(b)
	return len(b), nil
}
func (w *fakeWriter) Close() error        { return nil }
func (w *fakeWriter) TsigStatus() error   { return nil }
func (w *fakeWriter) TsigTimersOnly(bool) {}
func (w *fakeWriter) Hijack()             {}

func seed(name string, qtype uint16, edns bool) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(4096, true)
	}
	b, _ := m.Pack()
	return b
}

// FuzzHandler feeds arbitrary datagrams through the same path as the server:
// unpack, then ServeDNS. It must never panic, and every reply must pack, fit
// the client's size over UDP and answer the question that was asked.
func FuzzHandler(f *testing.F) {
	for _, s := range [][]byte{
		seed("web.ns.svc.cluster.local.", dns.TypeA, false),
		seed("WEB.ns.svc.cluster.local.", dns.TypeSRV, true),
		seed("_http._tcp.hl.ns.svc.cluster.local.", dns.TypeSRV, false),
		seed("loop1.ns.svc.cluster.local.", dns.TypeA, false),
		seed("10-1-2-3.ns.pod.cluster.local.", dns.TypeA, false),
		seed("fd00--1.ns.pod.cluster.local.", dns.TypeAAAA, true),
		seed("1.0.0.10.in-addr.arpa.", dns.TypePTR, false),
		seed("cluster.local.", dns.TypeANY, true),
		seed("example.org.", dns.TypeA, false),
		seed("www.big.example.", dns.TypeA, true),
		seed("www.nx.example.", dns.TypeAAAA, false),
		seed("web.search.ns.cluster.local.ap.k8s.io.", dns.TypeA, true),
		seed("www.big.example.search.ns.cluster.local.ap.k8s.io.", dns.TypeA, false),
		{0, 1, 2},
	} {
		f.Add(s, false)
	}
	// Autopath and forwarding on, to a fake upstream on loopback that
	// answers deterministically (so that the second reply is the same bytes).
	up := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: dns.HandlerFunc(fuzzUpstream)}
	if err := up.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { up.Shutdown(context.Background()) })
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams(up.Addrs()), Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	if err != nil {
		f.Fatal(err)
	}
	ap, err := WithAutopath(0, nil)
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler("cluster.local", fuzzStore(f), WithForwarder(fwd), ap)
	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return // the server drops or FORMERRs these before the handler
		}
		if req.Response {
			return // the server drops these before the handler
		}
		w := &fakeWriter{tcp: tcp}
		h.ServeDNS(w, req)
		if w.msg == nil {
			t.Fatal("no reply")
		}
		if w.err != nil {
			t.Fatalf("reply does not unpack: %v", w.err)
		}
		b := w.wire
		// The second answer may come from the wire cache: it must be the
		// same bytes.
		w2 := &fakeWriter{tcp: tcp}
		h.ServeDNS(w2, req)
		if string(w2.wire) != string(b) {
			t.Fatalf("cached reply differs:\n%v\n%v", w.msg, w2.msg)
		}
		if !tcp {
			// A reply answered from the query's wire form is the bytes
			// ServeDNS sends; a query ParseQuery reads whose reply is
			// cached is answered so.
			out, ok := h.AnswerWire(nil, data)
			if ok && string(out) != string(b) {
				t.Fatalf("AnswerWire reply differs:\n%x\n%x", out, b)
			}
			if _, parsed := dnsmsg.ParseQuery(data); parsed && !ok {
				if k, cacheable := cacheKeyOf(req, false); cacheable {
					if z := h.zone(); z != nil {
						if _, cached := h.wire.Get(k); cached {
							t.Fatalf("a cached reply not answered from the wire form")
						}
					}
				}
			}
			// 512 bytes without EDNS0, else the client's size within
			// 512..1232 (DNS Flag Day 2020), whatever it claimed.
			limit := 512
			if o := req.IsEdns0(); o != nil {
				limit = min(1232, max(512, int(o.UDPSize())))
			}
			if len(b) > limit {
				t.Fatalf("udp reply %d bytes > %d", len(b), limit)
			}
		}
		if w.msg.Id != req.Id || !w.msg.Response {
			t.Fatalf("reply id/qr wrong")
		}
	})
}

// fuzzUpstream answers like a recursive server, the same way every time:
// NXDOMAIN under nx.example., 100 A records (too many for 1232 bytes) under
// big.example., one A record otherwise; FORMERR without one question.
func fuzzUpstream(w dns.ResponseWriter, req *dns.Msg) {
	r := new(dns.Msg)
	if len(req.Question) != 1 {
		r.SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(r)
		return
	}
	r.SetReply(req)
	r.RecursionAvailable = true
	q := req.Question[0]
	n := 1
	switch {
	case dns.IsSubDomain("nx.example.", strings.ToLower(q.Name)):
		r.Rcode = dns.RcodeNameError
		n = 0
	case dns.IsSubDomain("big.example.", strings.ToLower(q.Name)):
		n = 100
	}
	if q.Qtype == dns.TypeA {
		for i := range n {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
				A: net.IPv4(192, 0, 2, byte(i))})
		}
	}
	if o := req.IsEdns0(); o != nil {
		r.SetEdns0(1232, o.Do())
	}
	_ = w.WriteMsg(r)
}

// TestBadDatagrams sends malformed packets to a live server and checks that
// it keeps answering correctly.
func TestBadDatagrams(t *testing.T) {
	h := NewHandler("cluster.local", fuzzStore(t))
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h}
	addr := testkit.StartServer(t, srv)

	good := seed("web.ns.svc.cluster.local.", dns.TypeA, false)
	multi := new(dns.Msg)
	multi.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	multi.Question = append(multi.Question, dns.Question{Name: "hl.ns.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	multiB, _ := multi.Pack()
	chaos := new(dns.Msg)
	chaos.SetQuestion("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	chaosB, _ := chaos.Pack()
	unknownClass := new(dns.Msg)
	unknownClass.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	unknownClass.Question[0].Qclass = 77
	unknownB, _ := unknownClass.Pack()
	badvers := new(dns.Msg)
	badvers.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	badvers.SetEdns0(1232, false)
	badvers.IsEdns0().SetVersion(1)
	badversB, _ := badvers.Pack()
	oversized := make([]byte, 9000)
	copy(oversized, good)
	garbage := []byte("\x13\x37 this is not a DNS message at all, just text\n")

	cases := []struct {
		name  string
		data  []byte
		rcode int // -1: no reply expected (dropped)
	}{
		{"empty", []byte{}, -1},
		{"header only truncated", good[:5], -1},
		{"truncated question", good[:len(good)-3], dns.RcodeFormatError},
		{"garbage", garbage, -2},
		{"oversized", oversized, -2},
		{"multi-question", multiB, dns.RcodeFormatError},
		{"chaos class", chaosB, dns.RcodeRefused},
		{"unknown class", unknownB, dns.RcodeRefused},
		{"edns version 1", badversB, dns.RcodeBadVers},
		{"response bit set", func() []byte { b := append([]byte(nil), good...); b[2] |= 0x80; return b }(), -1},
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 65535)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conn.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := conn.Read(buf)
			switch {
			case tc.rcode == -1 && err == nil:
				t.Fatalf("got a %d-byte reply to a packet that should be dropped", n)
			case tc.rcode == -1 || (tc.rcode == -2 && err != nil):
				return
			case err != nil:
				t.Fatalf("no reply: %v", err)
			}
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				t.Fatalf("reply does not unpack: %v", err)
			}
			if tc.rcode >= 0 && r.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
		})
		// After every bad packet, a good query still gets the right answer
		// over UDP and TCP.
		for _, network := range []string{"udp", "tcp"} {
			r := testkit.Ask(t, network, addr, new(dns.Msg).SetQuestion("web.ns.svc.cluster.local.", dns.TypeA))
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
				t.Fatalf("after %s over %s: %v", tc.name, network, r)
			}
		}
	}
	// Garbage over TCP: the connection is dropped, the server keeps serving.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte{0x00, 0x05, 1, 2, 3, 4, 5})
	_, _ = c.Write([]byte{0xff, 0xff})
	c.Close()
	if r := testkit.Ask(t, "tcp", addr, new(dns.Msg).SetQuestion("hl.ns.svc.cluster.local.", dns.TypeA)); len(r.Answer) != 1 {
		t.Fatalf("tcp after garbage: %v", r)
	}
}

// TestChaseLoop checks that an ExternalName loop inside the zone ends.
func TestChaseLoop(t *testing.T) {
	h := NewHandler("cluster.local", fuzzStore(t))
	r := h.Resolve(context.Background(), dns.Question{Name: "loop1.ns.svc.cluster.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("loop: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

// cacheKeyOf returns the cache key of a request, and false for requests
// whose reply is not cacheable: responses, and queries dnsmsg.Check rejects
// (not exactly one question, not a plain query, EDNS versions other than 0).
// The size limit is dnsmsg.ReplySize, the size Finish truncates to.
func cacheKeyOf(req *dns.Msg, tcp bool) (replycache.Key, bool) {
	q := query{req: req, tcp: tcp}
	if q.opt, q.rcode = dnsmsg.Check(req); q.rcode != dns.RcodeSuccess || req.Response {
		return replycache.Key{}, false
	}
	return q.cacheKey(), true
}
