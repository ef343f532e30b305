package dnscache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newCache returns a cache on a manual clock. A test that sets no TTL cap
// gets 1 h and 30 min: its records' TTLs are under them, so it sees the
// rule it tests and not the default caps (TestDefaultCaps has those).
func newCache(t testing.TB, next Exchanger, cfg Config) (*Cache, *testkit.Clock) {
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
	clk := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
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

// startStub is an upstream on 127.0.0.1 (UDP) that answers with answer.
func startStub(t *testing.T, answer func(q dns.Question, r *dns.Msg)) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(answer), testkit.UDPOnly())
}

// udpNext asks addr over UDP.
type udpNext struct{ addr string }

func (u udpNext) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	r, _, err := c.ExchangeContext(ctx, q, u.addr)
	return r, err
}

func rrA(name string, ttl uint32) dns.RR {
	return testkit.A(name, ttl, "192.0.2.1")
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
