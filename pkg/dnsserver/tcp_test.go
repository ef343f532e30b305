package dnsserver_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// send writes a query for name with id on c.
func send(t *testing.T, c *dns.Conn, name string, id uint16) {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	m.Id = id
	if err := c.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
}

// replies reads n replies from c and returns their ids, in order.
func replies(t *testing.T, c *dns.Conn, n int) []uint16 {
	t.Helper()
	var ids []uint16
	for range n {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatalf("after %d replies: %v", len(ids), err)
		}
		if len(r.Answer) != 1 {
			t.Fatalf("reply %d: %v", r.Id, r)
		}
		ids = append(ids, r.Id)
	}
	return ids
}

// allIn reports whether every id of got is in [lo, hi) and none repeats.
func allIn(got []uint16, lo, hi uint16) bool {
	seen := map[uint16]bool{}
	for _, id := range got {
		if id < lo || id >= hi || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

// TestTCPMalformed: a message whose header does not parse (shorter than
// 12 bytes), or a response, closes its connection at once and is counted;
// miekg/dns left such a client waiting with the connection busy. A query
// whose header parses but whose body does not gets FORMERR, and the
// connection stays.
func TestTCPMalformed(t *testing.T) {
	response, _ := new(dns.Msg).SetReply(new(dns.Msg).SetQuestion("r.example.", dns.TypeA)).Pack()
	cut := []byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 5, 'a'} // a question cut short
	frame := func(b []byte) []byte { return append([]byte{byte(len(b) >> 8), byte(len(b))}, b...) }
	for _, tc := range []struct {
		name    string
		payload []byte
		closed  bool
	}{
		{"four bytes", []byte{0x00, 0x04, 0x00, 0x00, 0x00, 0x00}, true},
		{"empty", []byte{0x00, 0x00}, true},
		{"eleven bytes", frame(make([]byte, 11)), true},
		{"a response", frame(response), true},
		{"a body that does not unpack", frame(cut), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &dnsserver.Server{Handler: answerA}
			c := dialFrom(t, "127.0.0.2", startServer(t, srv))
			if err := ask(c, "before.example."); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Conn.Write(tc.payload); err != nil {
				t.Fatal(err)
			}
			var want float64
			if tc.closed {
				want = 1
				if !closedByServer(c) {
					t.Fatal("the connection is still open")
				}
				testkit.WaitEqual(t, 5*time.Second, "tcp_connections",
					func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }, 0)
			} else {
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				if r, err := c.ReadMsg(); err != nil || r.Rcode != dns.RcodeFormatError {
					t.Fatalf("reply %v %v, want FORMERR", r, err)
				}
				if err := ask(c, "after.example."); err != nil {
					t.Fatalf("the connection after FORMERR: %v", err)
				}
			}
			if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_malformed_total"); got != want {
				t.Errorf("tcp_malformed_total = %v, want %v", got, want)
			}
		})
	}
}

// TestTCPPartialMessage: a message that never completes, whether its
// bytes stop or keep coming one at a time, holds its connection no
// longer than the read timeout: the whole message must come within it.
func TestTCPPartialMessage(t *testing.T) {
	const idle = 400 * time.Millisecond
	for _, tc := range []struct {
		name       string
		queryFirst bool
		dribble    bool
	}{
		{name: "length only"},
		{name: "dribbled", dribble: true},
		{name: "after a query", queryFirst: true},
		{name: "dribbled after a query", queryFirst: true, dribble: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &dnsserver.Server{Handler: answerA, TCPIdleTimeout: idle}
			c := dialFrom(t, "127.0.0.2", startServer(t, srv))
			if tc.queryFirst {
				if err := ask(c, "first.example."); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			if _, err := c.Conn.Write([]byte{0x00, 0x40, 0x00}); err != nil {
				t.Fatal(err)
			}
			if tc.dribble {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				defer func() { cancel(); <-done }()
				go func() {
					defer close(done)
					testkit.Every(ctx, idle/8, func() bool {
						_, err := c.Conn.Write([]byte{0x00})
						return err == nil
					})
				}()
			}
			if !closedByServer(c) {
				t.Fatal("the connection is still open")
			}
			took := time.Since(start)
			t.Logf("closed %v after the message began", took.Round(time.Millisecond))
			if took > idle+time.Second {
				t.Errorf("closed after %v, want within a second of the %v timeout", took, idle)
			}
			testkit.WaitEqual(t, 5*time.Second, "tcp_connections",
				func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_connections") }, 0)
		})
	}
}

// TestTCPPipelined: queries pipelined on one connection are answered
// concurrently, each reply when ready (RFC 7766 6.2.1.1): 50 queries held
// by the handler do not delay the 50 sent between them, which are
// answered first; the held ones follow once released.
func TestTCPPipelined(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	srv := &dnsserver.Server{Handler: holding(release, &held)}
	c := dialFrom(t, "127.0.0.2", startServer(t, srv))
	const n = 50
	for i := range uint16(n) {
		send(t, c, "hold.example.", i)   // ids 0-49
		send(t, c, "fast.example.", n+i) // ids 50-99
	}
	if got := replies(t, c, n); !allIn(got, n, 2*n) {
		t.Fatalf("first %d replies %v, want those of the queries not held", n, got)
	}
	// The held queries (an answered one leaves the count just after its
	// reply).
	testkit.WaitEqual(t, 5*time.Second, "tcp_queries_in_flight",
		func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_queries_in_flight") }, n)
	close(release)
	if got := replies(t, c, n); !allIn(got, 0, n) {
		t.Fatalf("replies after the release %v, want the held queries'", got)
	}
}

// TestTCPBackpressure: at the per-connection bound the connection is not
// read until a query is answered; the next query waits (counted), is not
// dropped, and is answered once one of the held ones is. The default
// bound allows tcpPipelined (at least 128) queries at once.
func TestTCPBackpressure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound int // 0: the default
	}{{"bound 4", 4}, {"default bound", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var held atomic.Int64
			srv := &dnsserver.Server{Handler: holding(release, &held)}
			bound := tc.bound
			if bound == 0 {
				bound = dnsserver.TCPPipelined
			} else {
				dnsserver.TCPLimits(srv, bound, 1000, 1000, 0)
			}
			if bound < 128 && tc.bound == 0 {
				t.Fatalf("TCPPipelined = %d, want at least 128", bound)
			}
			c := dialFrom(t, "127.0.0.2", startServer(t, srv))
			for i := range uint16(bound) {
				send(t, c, "hold.example.", i)
			}
			send(t, c, "fast.example.", uint16(bound))
			testkit.WaitEqual(t, 5*time.Second, "held", held.Load, int64(bound))
			testkit.WaitEqual(t, 5*time.Second, "tcp_waited_total",
				func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_waited_total") }, 1)
			if got := metric(t, srv, "dnsconfigurer_dnsserver_tcp_queries_in_flight"); got != float64(bound) {
				t.Errorf("tcp_queries_in_flight = %v, want %d", got, bound)
			}
			close(release)
			if got := replies(t, c, bound+1); !allIn(got, 0, uint16(bound)+1) {
				t.Fatalf("replies %v, want every query's", got)
			}
		})
	}
}

// TestTCPDrain: Shutdown stops accepting and reading, and the replies to
// the queries being answered still leave before the connection closes.
func TestTCPDrain(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	srv := &dnsserver.Server{Handler: holding(release, &held)}
	addr := startServer(t, srv)
	c := dialFrom(t, "127.0.0.2", addr)
	const n = 3
	for i := range uint16(n) {
		send(t, c, "hold.example.", i)
	}
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, n)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	testkit.WaitFor(t, 5*time.Second, func() error {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
			return errors.New("still accepting connections")
		}
		return nil
	})
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with queries being answered", err)
	default:
	}
	close(release)
	if got := replies(t, c, n); !allIn(got, 0, n) {
		t.Fatalf("replies %v, want the held queries'", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if !closedByServer(c) {
		t.Error("the connection is still open after Shutdown")
	}
}

// TestTCPFairShare: a client over its share of the in-flight slots waits
// (its connection not read), and another client under its share is
// answered at once. With 8 slots and 2 kept for clients under their
// share, a client alone takes 6 and its next queries wait; a second
// client's queries are answered meanwhile, and it may hold its share.
func TestTCPFairShare(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	srv := &dnsserver.Server{Handler: holding(release, &held)}
	dnsserver.TCPLimits(srv, 128, 8, 8, 2)
	addr := startServer(t, srv)
	heavy := dialFrom(t, "127.0.0.2", addr)
	const many = 20
	for i := range uint16(many) {
		send(t, heavy, "hold.example.", i)
	}
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, 6)
	testkit.WaitEqual(t, 5*time.Second, "tcp_waited_total",
		func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_waited_total") }, 1)

	light := dialFrom(t, "127.0.0.3", addr)
	for i := range 5 {
		if err := ask(light, "light.example."); err != nil {
			t.Fatalf("the light client's query %d: %v", i, err)
		}
	}
	send(t, light, "hold.example.", 100)
	send(t, light, "hold.example.", 101)
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, 8)
	testkit.WaitEqual(t, 5*time.Second, "tcp_queries_in_flight",
		func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_tcp_queries_in_flight") }, 8)
	close(release)
	if got := replies(t, light, 2); !allIn(got, 100, 102) {
		t.Errorf("the light client's replies %v", got)
	}
	if got := replies(t, heavy, many); !allIn(got, 0, many) {
		t.Errorf("the heavy client's replies %v, want all %d", got, many)
	}
}

// TestTCPHandlerSeesTCP: the handler's writer reports the client's TCP
// address and the listener's.
func TestTCPHandlerSeesTCP(t *testing.T) {
	var remote, local atomic.Value
	srv := &dnsserver.Server{Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		remote.Store(w.RemoteAddr().String())
		local.Store(w.LocalAddr().String())
		answerA.ServeDNS(w, r)
	})}
	addr := startServer(t, srv)
	c := dialFrom(t, "127.0.0.2", addr)
	if err := ask(c, "x.example."); err != nil {
		t.Fatal(err)
	}
	if got := remote.Load().(string); got != c.LocalAddr().String() {
		t.Errorf("RemoteAddr %s, want %s", got, c.LocalAddr())
	}
	if got := local.Load().(string); got != addr {
		t.Errorf("LocalAddr %s, want %s", got, addr)
	}
}
