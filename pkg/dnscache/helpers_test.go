package dnscache

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a manual clock for Cache.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newCache returns a cache on a manual clock. A test that sets no TTL cap
// gets 1 h and 30 min: its records' TTLs are under them, so it sees the
// rule it tests and not the default caps (TestDefaultCaps has those).
func newCache(t testing.TB, next Exchanger, cfg Config) (*Cache, *clock) {
	t.Helper()
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = time.Hour
	}
	if cfg.MaxNegativeTTL == 0 {
		cfg.MaxNegativeTTL = 30 * time.Minute
	}
	c, err := New(next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.now = clk.Now
	c.epoch = clk.Now()
	t.Cleanup(c.Close)
	return c, clk
}

// nextFunc is a fake Exchanger that counts its calls.
type nextFunc struct {
	calls atomic.Int32
	f     func(q *dns.Msg) (*dns.Msg, error)
}

func (n *nextFunc) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	n.calls.Add(1)
	return n.f(q)
}

// stub is an upstream DNS server on 127.0.0.1 (UDP) that reports every
// query it gets on seen (when not nil) and answers with answer.
type stub struct {
	addr    string
	queries atomic.Int32
	seen    chan dns.Question
	answer  atomic.Pointer[func(q dns.Question, r *dns.Msg)]
	srv     *dns.Server
	stopped sync.Once
}

func startStub(t *testing.T, answer func(q dns.Question, r *dns.Msg)) *stub {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stub{addr: pc.LocalAddr().String(), seen: make(chan dns.Question, 64)}
	s.answer.Store(&answer)
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
			s.queries.Add(1)
			select {
			case s.seen <- req.Question[0]:
			default:
			}
			r := new(dns.Msg)
			r.SetReply(req)
			(*s.answer.Load())(req.Question[0], r)
			_ = w.WriteMsg(r)
		})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.ActivateAndServe()
	}()
	<-started
	t.Cleanup(func() {
		s.stop()
		<-done
	})
	return s
}

func (s *stub) stop() { s.stopped.Do(func() { _ = s.srv.Shutdown() }) }

// udpNext asks addr over UDP.
type udpNext struct{ addr string }

func (u udpNext) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	r, _, err := c.ExchangeContext(ctx, q, u.addr)
	return r, err
}

func rrA(name string, ttl uint32) dns.RR {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(192, 0, 2, 1)}
}

func soa(zone string, ttl, minttl uint32) dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns." + zone, Mbox: "h." + zone, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minttl}
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
