package dnsserver_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// countingA answers every query with one A record, ip, and counts it.
func countingA(ip net.IP, n *atomic.Int64) dns.Handler {
	return testkit.Reply(func(q dns.Question, r *dns.Msg) {
		n.Add(1)
		r.Answer = []dns.RR{testkit.A(q.Name, 5, ip.String())}
	})
}

// startAt starts srv on addr and shuts it down at cleanup (a second Shutdown
// is harmless).
func startAt(t *testing.T, srv *dnsserver.Server, addr string) error {
	t.Helper()
	srv.Listen = []string{addr}
	if err := srv.Start(context.Background()); err != nil {
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return nil
}

// TestReusePortBind: two Servers with ReusePort bind the same 127.0.0.1
// port, UDP and TCP, at once, and both answer on each; a Server without
// ReusePort cannot bind it next to them, nor can one with ReusePort bind
// next to a Server without it.
func TestReusePortBind(t *testing.T) {
	var na, nb atomic.Int64
	a := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 1), &na), ReusePort: true}
	if err := startAt(t, a, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := a.Addrs()[0]
	b := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 2), &nb), ReusePort: true}
	if err := startAt(t, b, addr); err != nil {
		t.Fatalf("second ReusePort server on %s: %v", addr, err)
	}
	if got := b.Addrs()[0]; got != addr {
		t.Fatalf("second server bound %s, want %s", got, addr)
	}
	// Each query comes from a new source port: the kernel's hash sends some
	// to each server, over each transport.
	for _, network := range []string{"udp", "tcp"} {
		a0, b0 := na.Load(), nb.Load()
		for i := 0; i < 200 && (na.Load() == a0 || nb.Load() == b0); i++ {
			if r := testkit.Ask(t, network, addr, new(dns.Msg).SetQuestion("x.example.", dns.TypeA)); len(r.Answer) != 1 {
				t.Fatalf("%s query %d: %v", network, i, r)
			}
		}
		if na.Load() == a0 || nb.Load() == b0 {
			t.Errorf("%s: 200 queries, answered by the first server %d, the second %d: want both", network, na.Load()-a0, nb.Load()-b0)
		}
	}

	plain := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 3), &nb)}
	if err := startAt(t, plain, addr); err == nil {
		t.Errorf("a server without ReusePort bound %s next to two with it", addr)
	}

	p := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 4), &nb)}
	if err := startAt(t, p, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 5), &nb), ReusePort: true}
	if err := startAt(t, r, p.Addrs()[0]); err == nil {
		t.Errorf("a ReusePort server bound %s next to one without it", p.Addrs()[0])
	}
}

// stub queries addr one query at a time, as a stub resolver does: each query
// gets up to attempts tries of timeout each, every try from a new socket.
type stub struct {
	network  string
	addr     string
	attempts int
	timeout  time.Duration

	sent, answered, retried, lost atomic.Int64
	byServer                      [256]atomic.Int64 // answers by the last octet of the A record
	lastErr                       atomic.Value
}

func (s *stub) run(stop <-chan struct{}) {
	c := &dns.Client{Net: s.network, Timeout: s.timeout}
	for {
		select {
		case <-stop:
			return
		default:
		}
		s.sent.Add(1)
		q := new(dns.Msg).SetQuestion("restart.example.", dns.TypeA)
		ok := false
		for try := 0; try < s.attempts && !ok; try++ {
			if try > 0 {
				s.retried.Add(1)
			}
			r, _, err := c.Exchange(q, s.addr)
			if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
				if a, isA := r.Answer[0].(*dns.A); isA {
					ok = true
					s.byServer[a.A.To4()[3]].Add(1)
				}
			}
			if err != nil {
				s.lastErr.Store(err.Error())
			}
		}
		if ok {
			s.answered.Add(1)
		} else {
			s.lost.Add(1)
		}
	}
}

// TestRestartUnderLoad: a rolling restart with ReusePort loses no query.
// Clients query continuously over UDP and TCP, one query at a time with 2
// attempts of 300 ms (a stub resolver's retry); server A serves; server B
// binds the same address and starts; A is stopped through Run's lameduck
// path; B keeps serving. Every query is answered within its attempts, and
// both servers answered some. No UDP query needs a retry: A's sockets,
// detached as it stops, get no new datagram and answer what they had
// queued. The TCP retries it counts are the connections that were in A's
// accept queue: the kernel drops those with the socket, and only the
// client's retry (to the same address, now B alone) recovers them.
func TestRestartUnderLoad(t *testing.T) {
	const wait = 5 * time.Second
	var na, nb atomic.Int64
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	a := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: countingA(net.IPv4(192, 0, 2, 1), &na), ReusePort: true, Lameduck: 200 * time.Millisecond}
	runA := make(chan error, 1)
	go func() { runA <- a.Run(ctxA) }()
	var addr string
	if !testkit.Poll(wait, 10*time.Millisecond, func() bool {
		if as := a.Addrs(); len(as) == 1 {
			addr = as[0]
		}
		return addr != ""
	}) {
		stopA()
		t.Fatalf("server A did not start: %v", <-runA)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stubs []*stub
	for _, network := range []string{"udp", "udp", "udp", "tcp"} {
		s := &stub{network: network, addr: addr, attempts: 2, timeout: 300 * time.Millisecond}
		stubs = append(stubs, s)
		wg.Add(1)
		go func() { defer wg.Done(); s.run(stop) }()
	}
	stopped := false
	stopClients := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopClients()

	phase := func(name string, cond func() bool) {
		t.Helper()
		if !testkit.Poll(wait, 10*time.Millisecond, cond) {
			stopClients()
			t.Fatalf("%s: not within %v (A answered %d, B %d)", name, wait, na.Load(), nb.Load())
		}
	}
	phase("A serves", func() bool { return na.Load() >= 200 })

	b := &dnsserver.Server{Handler: countingA(net.IPv4(192, 0, 2, 2), &nb), ReusePort: true}
	if err := startAt(t, b, addr); err != nil {
		stopClients()
		t.Fatalf("server B on %s: %v", addr, err)
	}
	phase("B shares the load", func() bool { return nb.Load() >= 100 })

	aBefore := na.Load()
	stopA() // lameduck, then Shutdown
	select {
	case err := <-runA:
		if err != nil {
			t.Errorf("A's Run: %v", err)
		}
	case <-time.After(wait):
		stopClients()
		t.Fatal("A's Run did not return")
	}
	aAfter, bAtStop := na.Load(), nb.Load()
	phase("B serves alone", func() bool { return nb.Load() >= bAtStop+300 })
	stopClients()

	var sent, answered, retried, lost int64
	for _, s := range stubs {
		sent += s.sent.Load()
		answered += s.answered.Load()
		retried += s.retried.Load()
		lost += s.lost.Load()
		t.Logf("%s client: sent %d, answered %d (A %d, B %d), retried %d, lost %d",
			s.network, s.sent.Load(), s.answered.Load(), s.byServer[1].Load(), s.byServer[2].Load(), s.retried.Load(), s.lost.Load())
		if s.lost.Load() > 0 {
			t.Errorf("%s client lost %d queries (last error %v)", s.network, s.lost.Load(), s.lastErr.Load())
		}
		if s.network == "udp" && s.retried.Load() > 0 {
			t.Errorf("udp client retried %d queries: a datagram was lost as A stopped (last error %v)", s.retried.Load(), s.lastErr.Load())
		}
		if s.byServer[1].Load() == 0 || s.byServer[2].Load() == 0 {
			t.Errorf("%s client: answers from A %d, from B %d: want both", s.network, s.byServer[1].Load(), s.byServer[2].Load())
		}
	}
	t.Logf("total: sent %d, answered %d, retried %d, lost %d; A answered %d (%d in lameduck), B %d (%d after A stopped)",
		sent, answered, retried, lost, aAfter, aAfter-aBefore, nb.Load(), nb.Load()-bAtStop)
	if sent != answered+lost || lost != 0 {
		t.Errorf("sent %d, answered %d, lost %d", sent, answered, lost)
	}
	if n := na.Load(); n != aAfter {
		t.Errorf("A answered %d queries after its Run returned", n-aAfter)
	}
}
