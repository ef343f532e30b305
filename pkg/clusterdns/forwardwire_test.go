package clusterdns

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
)

// upstreamStub answers every A question with A records (four for names
// starting "multi", one else; NXDOMAIN for names starting "nx"), TTL 300,
// other types with NODATA, and counts the questions.
type upstreamStub struct{ asked atomic.Int64 }

func (u *upstreamStub) Exchange(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	u.asked.Add(1)
	r := new(dns.Msg)
	r.SetReply(m)
	q := m.Question[0]
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.com.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns.example.com.", Mbox: "h.example.com.", Serial: 1, Minttl: 60}
	switch {
	case strings.HasPrefix(strings.ToLower(q.Name), "nx"):
		r.Rcode = dns.RcodeNameError
		r.Ns = []dns.RR{soa}
	case q.Qtype != dns.TypeA:
		r.Ns = []dns.RR{soa}
	case strings.HasPrefix(strings.ToLower(q.Name), "multi"):
		for i := range 4 {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
				A: net.IPv4(192, 0, 2, byte(i+1))})
		}
	default:
		r.Answer = []dns.RR{testkit.A(q.Name, 300, "192.0.2.1")}
	}
	return r, nil
}

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// forwardingHandler is a cluster handler forwarding to a stub behind an
// answer cache with a test clock, as serve builds it.
func forwardingHandler(t *testing.T, opts ...Option) (*Handler, *dnscache.Cache, *upstreamStub, *testClock) {
	t.Helper()
	up := &upstreamStub{}
	clock := &testClock{t: time.Unix(1_000_000, 0)}
	cache, err := dnscache.New(up, dnscache.Config{Server: "cluster", Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	h := NewHandler("cluster.local", fuzzStore(t), append([]Option{WithAnswerCache(cache)}, opts...)...)
	return h, cache, up, clock
}

// TestForwardedWireIsServeDNSHit: a forwarded name whose answer is cached
// is answered from the wire with the bytes ServeDNS sends for it (ID, RD,
// CD, the question's case, OPT, truncation and the aged TTLs), without
// asking upstream, and counted as a cache hit as ServeDNS counts it.
func TestForwardedWireIsServeDNSHit(t *testing.T) {
	cookie := wireQuery("www.example.com.", dns.TypeA, true, false, 1232, false)
	cookie.IsEdns0().Option = append(cookie.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		lb   bool
	}{
		{"A", wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), false},
		{"A load balanced", wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), true},
		{"A rd off", wireQuery("www.example.com.", dns.TypeA, false, false, 0, false), false},
		{"A cd on", wireQuery("www.example.com.", dns.TypeA, true, true, 0, false), false},
		{"A mixed case", wireQuery("WwW.ExAmple.COM.", dns.TypeA, true, false, 0, false), false},
		{"A edns do", wireQuery("www.example.com.", dns.TypeA, true, false, 1232, true), false},
		{"A edns cookie", cookie, false},
		{"multi A", wireQuery("multi.example.com.", dns.TypeA, true, false, 512, false), false},
		{"NODATA", wireQuery("www.example.com.", dns.TypeAAAA, true, false, 0, false), false},
		{"NXDOMAIN", wireQuery("nx.example.com.", dns.TypeA, true, false, 1232, false), true},
		{"class ANY", func() *dns.Msg {
			m := wireQuery("www.example.com.", dns.TypeA, true, false, 0, false)
			m.Question[0].Qclass = dns.ClassANY
			return m
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, cache, up, clock := forwardingHandler(t, WithLoadBalance(tc.lb))
			reg := testkit.Registry(t, cache)
			q := mustPack(t, tc.req)
			serveUDP(t, h, tc.req) // a miss: asks upstream
			if _, ok := h.AnswerWire(nil, q); ok {
				t.Fatal("answered from the wire before ServeDNS made a reply from the cached answer")
			}
			serveUDP(t, h, tc.req)                                    // a hit: keeps the finished reply
			for _, age := range []time.Duration{0, 3 * time.Second} { // denials are cached 5 s
				clock.advance(age)
				hits := testkit.Gather(t, reg).Sum("dnsconfigurer_cache_hits_total")
				got, ok := h.AnswerWire(make([]byte, 0, 512), q)
				if !ok {
					t.Fatalf("age %v: not answered from the wire", age)
				}
				if n := testkit.Gather(t, reg).Sum("dnsconfigurer_cache_hits_total"); n != hits+1 {
					t.Errorf("age %v: cache hits %v → %v, want one more", age, hits, n)
				}
				want := serveUDP(t, h, tc.req)
				if !bytes.Equal(got, want) {
					t.Fatalf("age %v: reply differs from ServeDNS's:\n got %x\nwant %x", age, got, want)
				}
			}
			tc.req.Id = 0xbeef
			got, _ := h.AnswerWire(nil, mustPack(t, tc.req))
			if got[0] != 0xbe || got[1] != 0xef {
				t.Fatalf("reply to ID 0xbeef: %x", got[:4])
			}
			if n := up.asked.Load(); n != 1 {
				t.Errorf("upstream asked %d times, want 1", n)
			}
		})
	}
}

// TestForwardedWireLeftToServeDNS: forwarded replies that ServeDNS changes
// per reply or would no longer forward are never answered from the wire,
// however often ServeDNS has answered them from the cache.
func TestForwardedWireLeftToServeDNS(t *testing.T) {
	static := staticMap{"hosts.example.com.": true}
	rw, err := WithRewrites([]v1alpha1.Rewrite{{From: "db.example.com", To: "web.ns.svc.cluster.local"}})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		opts []Option
		// wire: the form ServeDNS keeps with these options is asked by a
		// handler with those instead (a reload that keeps the cache).
		wire []Option
		tcp  bool
	}{
		{name: "rotated answer", req: wireQuery("multi.example.com.", dns.TypeA, true, false, 0, false), opts: []Option{WithLoadBalance(true)}},
		{name: "load balancing switched on", req: wireQuery("multi.example.com.", dns.TypeA, true, false, 0, false),
			wire: []Option{WithLoadBalance(true)}},
		{name: "rewrites", req: wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), opts: []Option{rw}},
		{name: "rewrites added", req: wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), wire: []Option{rw}},
		{name: "static records added", req: wireQuery("hosts.example.com.", dns.TypeA, true, false, 0, false),
			wire: []Option{WithStatic(static)}},
		{name: "autopath suffix without autopath", req: wireQuery("x.search.ns.cluster.local.ap.k8s.io.", dns.TypeA, true, false, 0, false),
			wire: []Option{ap}},
		{name: "TCP", req: wireQuery("www.example.com.", dns.TypeA, true, false, 0, false), tcp: true},
		{name: "other size", req: wireQuery("www.example.com.", dns.TypeA, true, false, 1232, false),
			wire: []Option{func(*Handler) {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, cache, _, _ := forwardingHandler(t, tc.opts...)
			for range 3 {
				w := &fakeWriter{tcp: tc.tcp}
				h.ServeDNS(w, tc.req.Copy())
				if w.wire == nil {
					t.Fatal("ServeDNS did not answer")
				}
			}
			wh := h
			if tc.wire != nil {
				wh = NewHandler("cluster.local", fuzzStore(t), append([]Option{WithAnswerCache(cache)}, append(tc.opts, tc.wire...)...)...)
			}
			q := tc.req.Copy()
			if tc.name == "other size" {
				q.IsEdns0().SetUDPSize(800)
			}
			if b, ok := wh.AnswerWire(nil, mustPack(t, q)); ok {
				t.Fatalf("answered from the wire: %x", b)
			}
		})
	}
}

// staticMap is a Static whose names have one A record each.
type staticMap map[string]bool

func (s staticMap) Lookup(name string, qtype uint16) ([]dns.RR, bool) {
	if !s[name] {
		return nil, false
	}
	if qtype != dns.TypeA {
		return nil, true
	}
	return []dns.RR{testkit.A(name, 60, "192.0.2.9")}, true
}

// BenchmarkForwardedWire: a cached forwarded name answered from the wire,
// as the listener asks (allocations per answer).
func BenchmarkForwardedWire(b *testing.B) {
	up := &upstreamStub{}
	cache, err := dnscache.New(up, dnscache.Config{Server: "cluster"})
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	for _, lb := range []bool{false, true} {
		name := "plain"
		if lb {
			name = "loadbalance"
		}
		b.Run(name, func(b *testing.B) {
			h := NewHandler("cluster.local", fuzzStore(b), WithAnswerCache(cache), WithLoadBalance(lb))
			req := wireQuery("www.example.com.", dns.TypeA, true, false, 1232, false)
			for range 2 {
				h.ServeDNS(&fakeWriter{}, req.Copy())
			}
			q, _ := req.Pack()
			benchWire(b, h, q)
		})
	}
}
