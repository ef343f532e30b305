package dnsserver_test

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// dialFrom opens a TCP connection to addr from the loopback address from
// (a client of its own) and closes it at cleanup.
func dialFrom(t *testing.T, from, addr string) *dns.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 3 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	dc := &dns.Conn{Conn: c}
	t.Cleanup(func() { dc.Close() })
	return dc
}

// ask sends a query for name on c and reads its reply.
func ask(c *dns.Conn, name string) error {
	if err := c.WriteMsg(new(dns.Msg).SetQuestion(name, dns.TypeA)); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	r, err := c.ReadMsg()
	if err == nil && len(r.Answer) != 1 {
		err = errors.New("no answer")
	}
	return err
}

// closedByServer reports whether the server closed c: a read ends at
// once with EOF (or a reset) instead of timing out.
func closedByServer(c *dns.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := c.Conn.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && (errors.Is(err, io.EOF) || !errors.As(err, &ne) || !ne.Timeout())
}

// TestTCPSlots: past MaxTCPConns a new connection takes the place of a
// connection of the client holding the most, idle or waiting for a reply
// (the one with the oldest activity), which the server closes; the other
// connections keep their replies; past MaxTCPConnsPerClient a client's
// next connection is closed at once. Each is counted, and the open count
// stays exact.
func TestTCPSlots(t *testing.T) {
	t.Run("newcomer evicts the busiest client's oldest idle connection", func(t *testing.T) {
		srv := &dnsserver.Server{Handler: answerA, MaxTCPConns: 3, MaxTCPConnsPerClient: 3}
		addr := startServer(t, srv)
		quiet := dialFrom(t, "127.0.0.2", addr) // the longest idle, but its client holds one
		if err := ask(quiet, "q.example."); err != nil {
			t.Fatal(err)
		}
		heavy1, heavy2 := dialFrom(t, "127.0.0.3", addr), dialFrom(t, "127.0.0.3", addr)
		for _, c := range []*dns.Conn{heavy1, heavy2} {
			if err := ask(c, "h.example."); err != nil {
				t.Fatal(err)
			}
		}
		fresh := dialFrom(t, "127.0.0.4", addr)
		if err := ask(fresh, "f.example."); err != nil {
			t.Fatalf("the newcomer: %v", err)
		}
		if !closedByServer(heavy1) {
			t.Error("the busiest client's longest idle connection is still open")
		}
		for name, c := range map[string]*dns.Conn{"the quiet client's": quiet, "the busiest client's other": heavy2} {
			if err := ask(c, "again.example."); err != nil {
				t.Errorf("%s connection: %v, want it kept", name, err)
			}
		}
		testkit.WaitEqual(t, 5*time.Second, "tcp_evicted_total",
			func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_evicted_total") }, 1)
		testkit.WaitEqual(t, 5*time.Second, "tcp_connections",
			func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }, 3)
		if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_refused_total"); got != 0 {
			t.Errorf("tcp_refused_total = %v, want 0", got)
		}
	})

	t.Run("newcomer evicts a busy connection of the busiest client", func(t *testing.T) {
		release := make(chan struct{})
		var held atomic.Int64
		srv := &dnsserver.Server{Handler: holding(release, &held), MaxTCPConns: 3}
		addr := startServer(t, srv)
		heavy1, heavy2 := dialFrom(t, "127.0.0.3", addr), dialFrom(t, "127.0.0.3", addr)
		other := dialFrom(t, "127.0.0.2", addr)
		// Every connection waits for a reply; heavy1's query came first.
		for i, c := range []*dns.Conn{heavy1, heavy2, other} {
			if err := c.WriteMsg(new(dns.Msg).SetQuestion("hold.example.", dns.TypeA)); err != nil {
				t.Fatal(err)
			}
			testkit.WaitEqual(t, 5*time.Second, "held", held.Load, int64(i+1))
		}
		if err := ask(dialFrom(t, "127.0.0.4", addr), "f.example."); err != nil {
			t.Fatalf("the newcomer: %v", err)
		}
		if !closedByServer(heavy1) {
			t.Error("the busiest client's oldest connection is still open")
		}
		close(release)
		for name, c := range map[string]*dns.Conn{"the busiest client's other": heavy2, "the other client's": other} {
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if r, err := c.ReadMsg(); err != nil || len(r.Answer) != 1 {
				t.Errorf("%s held query: %v %v, want its answer", name, r, err)
			}
		}
		if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_evicted_total"); got != 1 {
			t.Errorf("tcp_evicted_total = %v, want 1", got)
		}
		if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_refused_total"); got != 0 {
			t.Errorf("tcp_refused_total = %v, want 0", got)
		}
	})

	t.Run("per client", func(t *testing.T) {
		srv := &dnsserver.Server{Handler: answerA, MaxTCPConns: 10, MaxTCPConnsPerClient: 2}
		addr := startServer(t, srv)
		mine := []*dns.Conn{dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)}
		for _, c := range mine {
			if err := ask(c, "m.example."); err != nil {
				t.Fatal(err)
			}
		}
		if !closedByServer(dialFrom(t, "127.0.0.2", addr)) {
			t.Error("the client's third connection was kept open, want it closed at once")
		}
		if err := ask(dialFrom(t, "127.0.0.3", addr), "other.example."); err != nil {
			t.Errorf("another client: %v", err)
		}
		if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_client_limited_total"); got != 1 {
			t.Errorf("tcp_client_limited_total = %v, want 1", got)
		}
		mine[0].Close()
		testkit.WaitEqual(t, 5*time.Second, "tcp_connections after one closed",
			func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }, 2)
		if err := ask(dialFrom(t, "127.0.0.2", addr), "again.example."); err != nil {
			t.Errorf("the client after closing one: %v", err)
		}
	})
}
