package dnsserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
)

// startServer starts srv, on 127.0.0.1 unless it has Listen, and shuts
// it down at cleanup. It returns its first address.
func startServer(t testing.TB, srv *dnsserver.Server) string {
	t.Helper()
	if len(srv.Listen) == 0 {
		srv.Listen = []string{"127.0.0.1:0"}
	}
	return testkit.StartServer(t, srv)
}

// answerA answers every query with one A record, 192.0.2.1.
var answerA = testkit.Reply(func(q dns.Question, r *dns.Msg) { r.Answer = []dns.RR{testkit.A(q.Name, 5, "192.0.2.1")} })

// holding is answerA, but it holds a query for hold.* until release is
// closed, counting it in held.
func holding(release <-chan struct{}, held *atomic.Int64) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if strings.HasPrefix(req.Question[0].Name, "hold.") {
			held.Add(1)
			<-release
		}
		answerA.ServeDNS(w, req)
	})
}

// metric is the value of the series name of srv's metrics.
func metric(t *testing.T, srv *dnsserver.Server, name string) float64 {
	t.Helper()
	return testkit.Value(t, testkit.Registry(t, srv), name)
}

// TestPanicIsServfail: a handler that panics answers SERVFAIL over UDP and
// TCP, the panic is counted, its stack logged once, and the server keeps
// answering.
func TestPanicIsServfail(t *testing.T) {
	var logs testkit.Buffer
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if strings.HasPrefix(req.Question[0].Name, "boom.") {
			var m map[string]int
			m["x"]++ // nil map write: a real runtime panic
		}
		answerA.ServeDNS(w, req)
	})
	srv := &dnsserver.Server{Handler: handler, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	addr := startServer(t, srv)
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := testkit.Ask(t, network, addr, new(dns.Msg).SetQuestion("boom.example.", dns.TypeA))
			if r.Rcode != dns.RcodeServerFailure {
				t.Fatalf("panicking query: %v, want SERVFAIL", r)
			}
			r = testkit.Ask(t, network, addr, new(dns.Msg).SetQuestion("fine.example.", dns.TypeA))
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("query after the panic: %v", r)
			}
		})
	}
	if got := metric(t, srv, "dnsconfigurer_dnsserver_panics_total"); got != 2 {
		t.Errorf("panics_total = %v, want 2", got)
	}
	// The SERVFAIL the guard wrote is counted as any reply.
	if got := metric(t, srv, `dnsconfigurer_dnsserver_responses_total{rcode="SERVFAIL",zone="."}`); got != 2 {
		t.Errorf("SERVFAIL responses = %v, want 2", got)
	}
	if n := strings.Count(logs.String(), "dns handler panicked"); n != 1 {
		t.Errorf("panic logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "guard_test.go") {
		t.Errorf("the log has no stack naming the panicking function:\n%s", logs.String())
	}
}

// TestUDPInFlightBound: with MaxUDPInFlight queries held in the handler,
// further datagrams are dropped and counted, not queued; once released the
// server answers again.
func TestUDPInFlightBound(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	srv := &dnsserver.Server{Handler: holding(release, &held), MaxUDPInFlight: 4}
	addr := startServer(t, srv)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 4 {
		b, _ := new(dns.Msg).SetQuestion("hold.example.", dns.TypeA).Pack()
		b[0], b[1] = 0, byte(i)
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitEqual(t, 5*time.Second, "held", held.Load, 4)
	for range 10 {
		b, _ := new(dns.Msg).SetQuestion("more.example.", dns.TypeA).Pack()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitEqual(t, 5*time.Second, "udp_dropped_total",
		func() float64 { return metric(t, srv, "dnsconfigurer_dnsserver_udp_dropped_total") }, 10)
	close(release)
	// The held queries free their slots once their replies are written: a
	// query sent before that is dropped like the others, and the client
	// asks again, as a resolver does.
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	testkit.WaitFor(t, 5*time.Second, func() error {
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion("after.example.", dns.TypeA), addr)
		if err != nil {
			return fmt.Errorf("after release: %w", err)
		}
		if len(r.Answer) != 1 {
			t.Fatalf("after release: %v", r)
		}
		return nil
	})
}

// TestLameduck: after Run's context ends the server keeps answering for
// Lameduck, or the lameduck SetLameduck gave while it ran (serve's
// config reload), with Ready false, then stops.
func TestLameduck(t *testing.T) {
	for _, tc := range []struct {
		name          string
		field, setRun time.Duration
	}{
		{"field", 3 * time.Second, -1},
		{"set while running", 0, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: answerA, Lameduck: tc.field}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			testkit.WaitEqual(t, 5*time.Second, "the server's addresses", func() int { return len(srv.Addrs()) }, 1)
			addr := srv.Addrs()[0]
			if !srv.Ready() {
				t.Fatal("not ready while serving")
			}
			if tc.setRun >= 0 {
				srv.SetLameduck(tc.setRun)
			}
			cancel()
			testkit.WaitEqual(t, 5*time.Second, "ready after the context ended", srv.Ready, false)
			c := &dns.Client{Timeout: time.Second}
			if r, _, err := c.Exchange(new(dns.Msg).SetQuestion("x.example.", dns.TypeA), addr); err != nil || len(r.Answer) != 1 {
				t.Fatalf("query in lameduck: %v %v", r, err)
			}
			if got := metric(t, srv, "dnsconfigurer_dnsserver_lameduck"); got != 1 {
				t.Errorf("lameduck gauge = %v, want 1", got)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after the lameduck")
			}
			if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("x.example.", dns.TypeA), addr); err == nil {
				t.Fatal("answered after the lameduck ended")
			}
		})
	}
}

// TestSetHandler: a handler swapped while the server runs answers the next
// query; a query in progress finishes with the old one.
func TestSetHandler(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	old := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if strings.HasPrefix(req.Question[0].Name, "slow.") {
			close(entered)
			<-release
		}
		answerA.ServeDNS(w, req)
	})
	srv := &dnsserver.Server{Handler: old}
	addr := startServer(t, srv)
	slow := make(chan *dns.Msg, 1)
	go func() {
		r, _, _ := (&dns.Client{Timeout: 5 * time.Second}).Exchange(new(dns.Msg).SetQuestion("slow.example.", dns.TypeA), addr)
		slow <- r
	}()
	<-entered
	srv.SetHandler(dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	}))
	if r := testkit.Ask(t, "udp", addr, new(dns.Msg).SetQuestion("new.example.", dns.TypeA)); r.Rcode != dns.RcodeNameError {
		t.Fatalf("after SetHandler: %v, want NXDOMAIN from the new handler", r)
	}
	close(release)
	if r := <-slow; r == nil || len(r.Answer) != 1 {
		t.Fatalf("the query in progress was not answered by the old handler: %v", r)
	}
}

// TestLogQueries: one line per query with its name, type, rcode and
// transport, for replies written as messages and as packed bytes.
func TestLogQueries(t *testing.T) {
	var logs testkit.Buffer
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if strings.HasPrefix(req.Question[0].Name, "packed.") {
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeNameError)
			b, _ := m.Pack()
			_, _ = w.Write(b)
			return
		}
		answerA.ServeDNS(w, req)
	})
	srv := &dnsserver.Server{Handler: dnsserver.LogQueries(h, slog.New(slog.NewTextHandler(&logs, nil)))}
	addr := startServer(t, srv)
	for _, q := range []struct{ network, name string }{{"udp", "one.example."}, {"tcp", "packed.example."}} {
		testkit.Ask(t, q.network, addr, new(dns.Msg).SetQuestion(q.name, dns.TypeAAAA))
	}
	want := []string{"name=one.example. type=AAAA rcode=NOERROR", "proto=udp", "name=packed.example. type=AAAA rcode=NXDOMAIN", "proto=tcp"}
	testkit.WaitFor(t, 5*time.Second, func() error {
		for _, w := range want {
			if !strings.Contains(logs.String(), w) {
				return fmt.Errorf("query log lacks %q:\n%s", w, logs.String())
			}
		}
		return nil
	})
}
