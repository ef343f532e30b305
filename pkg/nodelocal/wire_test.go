package nodelocal

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// The server's UDP reader asks the stage first.
var _ dnsserver.WireAnswerer = (*Handler)(nil)

// wireUpstream is an in-process cluster DNS with fixed answers by the
// question's first label (any case): "big" 100 A records (1.6 KB packed),
// "mid" 60 (1 KB packed, 1.6 KB without name compression), "nx" NXDOMAIN,
// "nodata" NOERROR without answer, "cname" a CNAME to a name below the
// question's parent and its A record, anything else two A records; TTLs
// 300, the SOA's 60 with minimum 20. fail makes it fail; asked reports each
// question it gets.
type wireUpstream struct {
	fail  atomic.Bool
	calls atomic.Int32
	asked chan string
}

func (u *wireUpstream) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	u.calls.Add(1)
	if u.asked != nil {
		u.asked <- q.Question[0].Name
	}
	if u.fail.Load() {
		return nil, errors.New("connection refused")
	}
	r := new(dns.Msg)
	r.SetReply(q)
	name := q.Question[0].Name
	a := func(owner string, i int) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(10, 0, byte(i/256), byte(i))}
	}
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns.example.", Mbox: "h.example.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 20}
	first, parent, _ := strings.Cut(strings.ToLower(name), ".")
	switch first {
	case "big":
		for i := range 100 {
			r.Answer = append(r.Answer, a(name, i))
		}
	case "mid":
		for i := range 60 {
			r.Answer = append(r.Answer, a(name, i))
		}
	case "nx":
		r.Rcode = dns.RcodeNameError
		r.Ns = []dns.RR{soa}
	case "nodata":
		r.Ns = []dns.RR{soa}
	case "cname":
		target := "target." + parent
		r.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: target},
			a(target, 1)}
	default:
		r.Answer = []dns.RR{a(name, 1), a(name, 2)}
	}
	return r, nil
}

// recorder is a dns.ResponseWriter that keeps what is written.
type recorder struct {
	tcp bool
	out []byte
}

func (w *recorder) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *recorder) RemoteAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (w *recorder) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	w.out = b
	return err
}
func (w *recorder) Write(b []byte) (int, error) {
	w.out = append([]byte(nil), b...)
	return len(b), nil
}
func (w *recorder) Close() error        { return nil }
func (w *recorder) TsigStatus() error   { return nil }
func (w *recorder) TsigTimersOnly(bool) {}
func (w *recorder) Hijack()             {}

// wireHandler is a Handler in front of up on a manual clock, its metrics
// registered on reg.
func wireHandler(t testing.TB, up Exchanger, cc dnscache.Config) (*Handler, *testkit.Clock, *prometheus.Registry) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	cc.Now = clk.Now
	reg := prometheus.NewRegistry()
	h, err := New(up, Config{Cache: cc, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, clk, reg
}

// slow is the reply ServeDNS writes for req over UDP (or TCP).
func slow(t *testing.T, h *Handler, req *dns.Msg, tcp bool) []byte {
	t.Helper()
	m := testkit.ThroughWire(t, req) // as the server gets it
	w := &recorder{tcp: tcp}
	h.ServeDNS(w, m)
	if w.out == nil {
		t.Fatal("ServeDNS wrote nothing")
	}
	return w.out
}

// fast is AnswerWire's reply for req.
func fast(t *testing.T, h *Handler, req *dns.Msg) ([]byte, bool) {
	t.Helper()
	b, err := req.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out, ok := h.AnswerWire(make([]byte, 0, 8), b)
	if ok && bytes.Equal(out, b) {
		t.Fatal("AnswerWire returned the query")
	}
	return out, ok
}

// firstTTL is the TTL of the first answer record, or else authority
// record, of the packed reply b.
func firstTTL(t *testing.T, b []byte) uint32 {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("unpack reply: %v", err)
	}
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		if len(sec) > 0 {
			return sec[0].Header().Ttl
		}
	}
	t.Fatalf("reply without records: %v", m)
	return 0
}

func wireQuery(name string, qtype uint16, build ...func(m *dns.Msg)) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 4321
	for _, b := range build {
		b(m)
	}
	return m
}

func edns(size uint16, do bool) func(m *dns.Msg) {
	return func(m *dns.Msg) { m.SetEdns0(size, do) }
}

// TestAnswerWireSameBytes: for every kind of query, AnswerWire's reply is
// byte for byte the reply ServeDNS writes at the same moment, for another
// ID and RD bit too, and again once time has passed (the TTLs aged); it
// answers nothing before ServeDNS has answered the query's shape from the
// cache, nor once the answer has expired.
func TestAnswerWireSameBytes(t *testing.T) {
	rdOff := func(m *dns.Msg) { m.RecursionDesired = false }
	cd := func(m *dns.Msg) { m.CheckingDisabled = true }
	cookie := func(m *dns.Msg) {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}
	}
	for _, tc := range []struct {
		name  string
		req   *dns.Msg
		rcode int
		tc    bool // the reply is truncated
	}{
		{"plain", wireQuery("www.example.", dns.TypeA), dns.RcodeSuccess, false},
		{"mixed case", wireQuery("WwW.ExAmPle.", dns.TypeA), dns.RcodeSuccess, false},
		{"rd off", wireQuery("www.example.", dns.TypeA, rdOff), dns.RcodeSuccess, false},
		{"cd", wireQuery("www.example.", dns.TypeA, cd), dns.RcodeSuccess, false},
		{"edns 1232", wireQuery("www.example.", dns.TypeA, edns(1232, false)), dns.RcodeSuccess, false},
		{"edns do", wireQuery("www.example.", dns.TypeA, edns(1232, true)), dns.RcodeSuccess, false},
		{"edns 4096", wireQuery("www.example.", dns.TypeA, edns(4096, false)), dns.RcodeSuccess, false},
		{"edns 100", wireQuery("www.example.", dns.TypeA, edns(100, false)), dns.RcodeSuccess, false},
		{"cookie", wireQuery("www.example.", dns.TypeA, cookie), dns.RcodeSuccess, false},
		{"cname", wireQuery("CNAME.Example.", dns.TypeA, edns(1232, false)), dns.RcodeSuccess, false},
		{"big without edns", wireQuery("big.example.", dns.TypeA), dns.RcodeSuccess, true},
		{"big edns 1232", wireQuery("Big.example.", dns.TypeA, edns(1232, true)), dns.RcodeSuccess, true},
		{"mid without edns", wireQuery("mid.example.", dns.TypeA), dns.RcodeSuccess, true},
		{"mid edns 1232 compressed", wireQuery("Mid.example.", dns.TypeA, edns(1232, false)), dns.RcodeSuccess, false},
		{"big edns 600", wireQuery("big.example.", dns.TypeA, edns(600, false)), dns.RcodeSuccess, true},
		{"nxdomain", wireQuery("nx.example.", dns.TypeA), dns.RcodeNameError, false},
		{"nxdomain edns", wireQuery("NX.example.", dns.TypeAAAA, edns(1232, false)), dns.RcodeNameError, false},
		{"nodata", wireQuery("nodata.example.", dns.TypeAAAA, edns(1232, true)), dns.RcodeSuccess, false},
		{"root", wireQuery(".", dns.TypeNS), dns.RcodeSuccess, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, clk, _ := wireHandler(t, &wireUpstream{}, dnscache.Config{})
			req := tc.req
			miss := slow(t, h, req, false) // asks upstream, caches
			if _, ok := fast(t, h, req); ok {
				t.Fatal("AnswerWire answered before ServeDNS made a reply of this shape from the cache")
			}
			clk.Advance(2 * time.Second)
			hit := slow(t, h, req, false) // a hit: its reply is kept
			f, ok := fast(t, h, req)
			if !ok {
				t.Fatal("AnswerWire did not answer a cached question")
			}
			if !bytes.Equal(f, hit) {
				t.Fatalf("AnswerWire\n%x\nServeDNS\n%x", f, hit)
			}
			r := new(dns.Msg)
			if err := r.Unpack(f); err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tc.rcode || r.Truncated != tc.tc || r.Id != req.Id || r.Question[0] != req.Question[0] {
				t.Fatalf("reply %v: want rcode %s, TC %v, the query's ID and question", r, dns.RcodeToString[tc.rcode], tc.tc)
			}
			if ttl := firstTTL(t, f); ttl != firstTTL(t, miss)-2 {
				t.Fatalf("TTL %d two seconds after the miss answered %d", ttl, firstTTL(t, miss))
			}

			// Another ID: the same reply but for it.
			other := req.Copy()
			other.Id = 999
			f, ok = fast(t, h, other)
			if s := slow(t, h, other, false); !ok || !bytes.Equal(f, s) {
				t.Fatalf("ID changed: AnswerWire (%v)\n%x\nServeDNS\n%x", ok, f, s)
			}
			// The other RD bit is another answer (dnscache keys on RD).
			other.RecursionDesired = !req.RecursionDesired
			if _, ok := fast(t, h, other); ok {
				t.Fatal("AnswerWire answered the other RD bit from this one's answer")
			}

			// Time passes: the TTLs age alike (denials live 5 s).
			clk.Advance(2*time.Second + 500*time.Millisecond)
			f, ok = fast(t, h, req)
			if s := slow(t, h, req, false); !ok || !bytes.Equal(f, s) {
				t.Fatalf("4.5 s on: AnswerWire (%v)\n%x\nServeDNS\n%x", ok, f, s)
			}
			if ttl := firstTTL(t, f); ttl != firstTTL(t, miss)-4 {
				t.Fatalf("TTL %d 4.5 s after the miss answered %d", ttl, firstTTL(t, miss))
			}

			// A question in another case has no reply kept yet.
			flipped := req.Copy()
			flipped.Question[0].Name = flipCase(req.Question[0].Name)
			if flipped.Question[0].Name != req.Question[0].Name {
				if _, ok := fast(t, h, flipped); ok {
					t.Fatal("AnswerWire answered a question in another case from a reply it was not kept for")
				}
			}

			// Expired: no wire answer; ServeDNS asks again.
			clk.Advance(30 * time.Second)
			if _, ok := fast(t, h, req); ok {
				t.Fatal("AnswerWire answered an expired answer")
			}
		})
	}
}

// flipCase swaps the case of name's letters.
func flipCase(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// TestAnswerWireShapes: replies kept for one shape of query never answer
// another, and each shape gets its own once ServeDNS has answered it.
func TestAnswerWireShapes(t *testing.T) {
	h, _, _ := wireHandler(t, &wireUpstream{}, dnscache.Config{})
	shapes := []*dns.Msg{
		wireQuery("big.example.", dns.TypeA),
		wireQuery("big.example.", dns.TypeA, edns(512, false)),
		wireQuery("big.example.", dns.TypeA, edns(1232, false)),
		wireQuery("BIG.example.", dns.TypeA, edns(1232, false)),
	}
	slow(t, h, shapes[0], false)
	for i, req := range shapes {
		for _, other := range shapes[i:] {
			if _, ok := fast(t, h, other); ok {
				t.Fatalf("%v answered from the replies kept for the shapes before it", other.Question)
			}
		}
		hit := slow(t, h, req, false)
		f, ok := fast(t, h, req)
		if !ok || !bytes.Equal(f, hit) {
			t.Fatalf("shape %d: AnswerWire (%v)\n%x\nServeDNS\n%x", i, ok, f, hit)
		}
	}
}

// TestAnswerWireStale: with serve-stale on, an expired answer is never a
// wire answer: ServeDNS serves it stale when the upstream fails.
func TestAnswerWireStale(t *testing.T) {
	up := &wireUpstream{}
	h, clk, _ := wireHandler(t, up, dnscache.Config{ServeStale: time.Hour})
	req := wireQuery("www.example.", dns.TypeA)
	slow(t, h, req, false)
	slow(t, h, req, false)
	if _, ok := fast(t, h, req); !ok {
		t.Fatal("no wire answer while fresh")
	}
	clk.Advance(31 * time.Second)
	up.fail.Store(true)
	if _, ok := fast(t, h, req); ok {
		t.Fatal("AnswerWire answered an expired answer")
	}
	s := slow(t, h, req, false)
	if ttl := firstTTL(t, s); ttl != uint32(dnscache.DefaultStaleTTL/time.Second) {
		t.Fatalf("stale reply TTL %d, want %v", ttl, dnscache.DefaultStaleTTL)
	}
	if _, ok := fast(t, h, req); ok {
		t.Fatal("AnswerWire answered a stale answer")
	}
}

// TestAnswerWireMetrics: wire answers are counted as the hits they are, in
// the stage's metrics by type and in the cache's.
func TestAnswerWireMetrics(t *testing.T) {
	h, _, reg := wireHandler(t, &wireUpstream{}, dnscache.Config{})
	req := wireQuery("www.example.", dns.TypeAAAA)
	slow(t, h, req, false)
	slow(t, h, req, false)
	for range 5 {
		if _, ok := fast(t, h, req); !ok {
			t.Fatal("no wire answer")
		}
	}
	want := `
# HELP dnsconfigurer_nodelocal_cache_hits_total Queries answered from the cache, by query type.
# TYPE dnsconfigurer_nodelocal_cache_hits_total counter
dnsconfigurer_nodelocal_cache_hits_total{type="A"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="AAAA"} 6
dnsconfigurer_nodelocal_cache_hits_total{type="CNAME"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="HTTPS"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="MX"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="NS"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="PTR"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="SOA"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="SRV"} 0
dnsconfigurer_nodelocal_cache_hits_total{type="TXT"} 0
# HELP dnsconfigurer_cache_hits_total Queries answered from the cache, by kind of answer (success, denial).
# TYPE dnsconfigurer_cache_hits_total counter
dnsconfigurer_cache_hits_total{kind="denial",server="nodelocal"} 0
dnsconfigurer_cache_hits_total{kind="success",server="nodelocal"} 6
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dnsconfigurer_nodelocal_cache_hits_total", "dnsconfigurer_cache_hits_total"); err != nil {
		t.Fatal(err)
	}
}

// TestAnswerWirePrefetch: wire answers count towards a prefetch as other
// hits do, and start it.
func TestAnswerWirePrefetch(t *testing.T) {
	up := &wireUpstream{asked: make(chan string, 4)}
	h, clk, _ := wireHandler(t, up, dnscache.Config{Prefetch: dnscache.Prefetch{Amount: 3, Percentage: 20}})
	req := wireQuery("www.example.", dns.TypeA)
	slow(t, h, req, false)
	<-up.asked
	slow(t, h, req, false) // hit 1, kept
	clk.Advance(25 * time.Second)
	for range 2 { // hits 2 and 3, with 5 s of 30 left
		if _, ok := fast(t, h, req); !ok {
			t.Fatal("no wire answer")
		}
	}
	select {
	case name := <-up.asked:
		if name != req.Question[0].Name {
			t.Fatalf("prefetch asked %q", name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no prefetch")
	}
}

// TestAnswerWireServer: behind a real dnsserver.Server on loopback, cached
// UDP answers are wire answers (ServeDNS is not called for them) and are
// the same replies; TCP and other queries reach ServeDNS.
func TestAnswerWireServer(t *testing.T) {
	up := startUpstream(t, answerA(300))
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(fwd, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	c := &testkit.Counting{WireHandler: h}
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: c}
	addr := testkit.StartServer(t, srv)

	first := ask(t, addr, "udp", "web.example.", dns.TypeA, true) // miss
	ask(t, addr, "udp", "web.example.", dns.TypeA, true)          // hit, kept
	if n := c.Served(); n != 2 {
		t.Fatalf("ServeDNS served %d queries, want 2", n)
	}
	for range 20 {
		r := ask(t, addr, "udp", "web.example.", dns.TypeA, true)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].String() != first.Answer[0].String() || r.IsEdns0() == nil {
			t.Fatalf("wire answer %v, first answer %v", r, first)
		}
	}
	if n := c.Served(); n != 2 {
		t.Fatalf("ServeDNS served %d queries, want 2: the cached ones are wire answers", n)
	}
	ask(t, addr, "tcp", "web.example.", dns.TypeA, true)
	ask(t, addr, "udp", "other.example.", dns.TypeA, true)
	if n := c.Served(); n != 4 {
		t.Fatalf("ServeDNS served %d queries, want 4 (TCP and a miss)", n)
	}
}

// FuzzAnswerWire: whatever datagram AnswerWire answers, miekg/dns's server
// would accept and unpack, and ServeDNS answers it with the same bytes at
// the same moment. Every datagram is first served twice by ServeDNS (a
// miss, then a hit whose reply is kept), as the server would.
func FuzzAnswerWire(f *testing.F) {
	for _, q := range []*dns.Msg{
		wireQuery("www.example.", dns.TypeA),
		wireQuery("Big.Example.", dns.TypeA, edns(1232, true)),
		wireQuery("mid.example.", dns.TypeA),
		wireQuery("nx.example.", dns.TypeAAAA, edns(600, false)),
		wireQuery("nodata.example.", dns.TypeMX, func(m *dns.Msg) { m.CheckingDisabled = true }),
		wireQuery("cname.example.", dns.TypeA, func(m *dns.Msg) {
			m.SetEdns0(4096, false)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}
		}),
	} {
		b, err := q.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	h, clk, _ := wireHandler(f, &wireUpstream{}, dnscache.Config{SuccessBytes: 64 << 10, DenialBytes: 16 << 10})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(dns.Msg)
		unpacked := m.Unpack(b) == nil
		if unpacked && !m.Response && len(m.Question) == 1 {
			for range 2 {
				h.ServeDNS(&recorder{}, m)
			}
		}
		got, ok := h.AnswerWire(nil, b)
		if !ok {
			clk.Advance(time.Second)
			return
		}
		if !unpacked || m.Response || m.Opcode != dns.OpcodeQuery || len(m.Question) != 1 || len(m.Answer)+len(m.Ns) > 0 || len(m.Extra) > 1 {
			t.Fatalf("AnswerWire answered %x, which the server does not accept as a query (%v)", b, m)
		}
		w := &recorder{}
		h.ServeDNS(w, m)
		if !bytes.Equal(got, w.out) {
			t.Fatalf("AnswerWire\n%x\nServeDNS\n%x", got, w.out)
		}
		clk.Advance(time.Second)
	})
}
