package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// action is what pipeServer does with a query it read.
type action int

const (
	answer action = iota // at once
	hold                 // until release, then the held ones last first
	hangUp               // closes the connection, this query and those held unanswered
)

// pipeServer is a TCP upstream that reads every query of a connection as
// it comes, so that many are in flight, and answers them in any order:
// policy decides for the n-th query (from 1) read on the connection
// numbered conn (from 1). A reply is a TXT record holding the name asked.
type pipeServer struct {
	addr   string
	policy func(conn, n int, q *dns.Msg) action
	conns  atomic.Int32 // accepted
	ended  atomic.Int32 // closed by the client
	read   atomic.Int32 // queries read

	ln   net.Listener
	mu   sync.Mutex
	held []heldQuery
	open []*srvConn
	wg   sync.WaitGroup
}

type heldQuery struct {
	c    *srvConn
	conn int
	q    *dns.Msg
}

type srvConn struct {
	net.Conn
	wmu sync.Mutex
}

func newPipeServer(t testing.TB, policy func(conn, n int, q *dns.Msg) action) *pipeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &pipeServer{addr: ln.Addr().String(), policy: policy, ln: ln}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *pipeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		sc := &srvConn{Conn: c}
		s.mu.Lock()
		s.open = append(s.open, sc)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(int(s.conns.Add(1)), sc)
	}
}

func (s *pipeServer) serve(conn int, c *srvConn) {
	defer s.wg.Done()
	defer c.Close()
	dc := &dns.Conn{Conn: c}
	for n := 1; ; n++ {
		q, err := dc.ReadMsg()
		if err != nil {
			if errors.Is(err, io.EOF) {
				s.ended.Add(1)
			}
			return
		}
		s.read.Add(1)
		switch s.policy(conn, n, q) {
		case answer:
			c.reply(q)
		case hold:
			s.mu.Lock()
			s.held = append(s.held, heldQuery{c, conn, q})
			s.mu.Unlock()
		case hangUp:
			return
		}
	}
}

// release answers the held queries, the last read first.
func (s *pipeServer) release() {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		held[i].c.reply(held[i].q)
	}
}

// heldIDs checks that the held queries of each connection have distinct
// IDs.
func (s *pipeServer) heldIDs() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[[2]int]bool{}
	for _, h := range s.held {
		k := [2]int{h.conn, int(h.q.Id)}
		if seen[k] {
			return fmt.Errorf("ID %d twice in flight on connection %d", h.q.Id, h.conn)
		}
		seen[k] = true
	}
	return nil
}

func (c *srvConn) reply(q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	name := q.Question[0].Name
	r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30}, Txt: []string{name}}}
	b, err := r.Pack()
	if err != nil {
		panic(err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = (&dns.Conn{Conn: c.Conn}).Write(b)
}

// pipeForwarder is a Forwarder of the one upstream addr, over TCP,
// pipelined unless tune says otherwise; closed when the test ends.
func pipeForwarder(t testing.TB, addr string, tune func(*Config)) (*Forwarder, *upstream) {
	t.Helper()
	cfg := Config{Upstreams: StaticUpstreams{addr}, ForceTCP: true, Pipeline: true, MaxFails: NoHealthCheck, Timeout: 5 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, f.list().ups[0]
}

// askTCP sends name's TXT query to u over TCP (the path under test,
// below Exchange's limits) and checks that the reply is name's.
func askTCP(ctx context.Context, f *Forwarder, u *upstream, name string) error {
	r, err := f.query(ctx, u, new(dns.Msg).SetQuestion(name, dns.TypeTXT), true)
	if err != nil {
		return err
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != name {
		return fmt.Errorf("%s: got the reply %v", name, r.Answer)
	}
	return nil
}

// askAll asks n names prefix0.. at once and returns their errors.
func askAll(ctx context.Context, f *Forwarder, u *upstream, prefix string, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = askTCP(ctx, f, u, fmt.Sprintf("%s%d.example.org.", prefix, i)) })
	}
	wg.Wait()
	return errs
}

// inFlight is the number of queries registered on the connections to u.
func inFlight(u *upstream) int {
	p := &u.tcp.pipe
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pc := range p.conns {
		n += len(pc.waiting)
	}
	return n
}

// pipeGoroutines counts the pipelined connections' goroutines.
func pipeGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "forward.(*pipeline).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestPipelineInFlight: queries in flight at once share connections,
// pipelineDepth on each, with distinct IDs; replies sent last first reach
// their own waiters. Without Pipeline each query has a connection.
func TestPipelineInFlight(t *testing.T) {
	cases := []struct {
		name                string
		pipeline            bool
		inFlight, wantConns int
	}{
		{"one", true, 1, 1},
		{"a full connection", true, pipelineDepth, 1},
		{"one more dials", true, pipelineDepth + 1, 2},
		{"500 on 5", true, 500, 5},
		{"not pipelined", false, 50, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newPipeServer(t, func(int, int, *dns.Msg) action { return hold })
			f, u := pipeForwarder(t, srv.addr, func(c *Config) { c.Pipeline = tc.pipeline })
			done := make(chan []error)
			go func() { done <- askAll(context.Background(), f, u, "q", tc.inFlight) }()
			testkit.WaitEqual(t, 10*time.Second, "queries read", func() int { return int(srv.read.Load()) }, tc.inFlight)
			if err := srv.heldIDs(); err != nil {
				t.Error(err)
			}
			srv.release()
			for _, err := range <-done {
				if err != nil {
					t.Error(err)
				}
			}
			if got := int(srv.conns.Load()); got != tc.wantConns {
				t.Errorf("%d connections for %d queries in flight, want %d", got, tc.inFlight, tc.wantConns)
			}
			if tc.pipeline {
				misses := testutil.ToFloat64(f.m.cacheMisses.WithLabelValues(u.name, "tcp"))
				hits := testutil.ToFloat64(f.m.cacheHits.WithLabelValues(u.name, "tcp"))
				if int(misses) != tc.wantConns || int(hits) != tc.inFlight-tc.wantConns {
					t.Errorf("conn cache misses %v, hits %v; want %d, %d", misses, hits, tc.wantConns, tc.inFlight-tc.wantConns)
				}
			}
		})
	}
}

// TestPipelineCancel: a waiter whose context ends returns at once and
// frees its slot, which the next query takes on the same connection; the
// reply that comes later is dropped and counted.
func TestPipelineCancel(t *testing.T) {
	srv := newPipeServer(t, func(_, _ int, q *dns.Msg) action {
		if strings.HasPrefix(q.Question[0].Name, "held") {
			return hold
		}
		return answer
	})
	f, u := pipeForwarder(t, srv.addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- askTCP(ctx, f, u, "held-first.example.org.") }()
	testkit.WaitEqual(t, 5*time.Second, "queries read", func() int { return int(srv.read.Load()) }, 1)
	rest := make(chan []error, 1)
	go func() { rest <- askAll(context.Background(), f, u, "held", pipelineDepth-1) }()
	testkit.WaitEqual(t, 5*time.Second, "queries read", func() int { return int(srv.read.Load()) }, pipelineDepth)

	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled query: %v, want context.Canceled", err)
	}
	if n := inFlight(u); n != pipelineDepth-1 {
		t.Errorf("%d in flight after the cancel, want %d", n, pipelineDepth-1)
	}
	if err := askTCP(context.Background(), f, u, "now.example.org."); err != nil {
		t.Fatal(err)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1: the freed slot is taken", n)
	}
	srv.release()
	for _, err := range <-rest {
		if err != nil {
			t.Error(err)
		}
	}
	testkit.WaitEqual(t, 5*time.Second, "dropped replies", func() float64 {
		return testutil.ToFloat64(f.m.badReplies.WithLabelValues(u.name))
	}, 1)
}

// TestPipelineUpstreamCloses: the upstream closing a connection with
// queries in flight fails them at once; each is asked again once, on one
// connection dialled for the retries.
func TestPipelineUpstreamCloses(t *testing.T) {
	const n = 50
	cases := []struct {
		name  string
		later func(i int) action // the i-th query on a later connection
		fails bool
	}{
		{"retried on a fresh connection", func(int) action { return answer }, false},
		{"fresh one closed too: failed", func(i int) action {
			if i < n {
				return hold
			}
			return hangUp
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newPipeServer(t, func(conn, i int, _ *dns.Msg) action {
				switch {
				case conn > 1:
					return tc.later(i)
				case i == 1: // the first query warms the connection
					return answer
				case i <= n:
					return hold
				default:
					return hangUp
				}
			})
			f, u := pipeForwarder(t, srv.addr, nil)
			if err := askTCP(context.Background(), f, u, "warm.example.org."); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			errs := askAll(context.Background(), f, u, "q", n)
			if took := time.Since(start); took > f.cfg.Timeout/5 {
				t.Errorf("took %v of the %v timeout: the waiters did not fail at once", took, f.cfg.Timeout)
			}
			for _, err := range errs {
				if tc.fails != (err != nil) || (err != nil && !staleConn(err)) {
					t.Errorf("%v, want failed: %v (closed by the upstream)", err, tc.fails)
				}
			}
			if got := srv.conns.Load(); got != 2 {
				t.Errorf("%d connections, want 2: the first and one for the retries", got)
			}
			if got := testutil.ToFloat64(f.m.requests.WithLabelValues(u.name)); got != 1+2*n {
				t.Errorf("%v queries sent, want %d: one retry each", got, 1+2*n)
			}
		})
	}
}

// TestPipelineExpire: a connection idle for Config.Expire is closed, by
// itself (no Start); one with a query in flight is not.
func TestPipelineExpire(t *testing.T) {
	const expire = 50 * time.Millisecond
	srv := newPipeServer(t, func(_, _ int, q *dns.Msg) action {
		if strings.HasPrefix(q.Question[0].Name, "held") {
			return hold
		}
		return answer
	})
	f, u := pipeForwarder(t, srv.addr, func(c *Config) { c.Expire = expire })
	if err := askTCP(context.Background(), f, u, "a.example.org."); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 5*time.Second, "connections closed by the client", func() int { return int(srv.ended.Load()) }, 1)
	testkit.WaitEqual(t, time.Second, "pipelined goroutines", pipeGoroutines, 0)

	done := make(chan error, 1)
	go func() { done <- askTCP(context.Background(), f, u, "held.example.org.") }()
	testkit.WaitEqual(t, 5*time.Second, "queries read", func() int { return int(srv.read.Load()) }, 2)
	<-time.After(4 * expire) // the time under test
	if n := u.tcp.pipe.count(); n != 1 {
		t.Fatalf("%d connections with a query in flight, want 1", n)
	}
	srv.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	testkit.WaitEqual(t, 5*time.Second, "connections closed by the client", func() int { return int(srv.ended.Load()) }, 2)
}

// TestPipelineClose: Close ends the idle connections before it returns,
// and a busy one when its last query is answered; the upstream leaving the
// list does the same; a query after Close goes on a connection of its own.
func TestPipelineClose(t *testing.T) {
	var list atomic.Pointer[[]string]
	srv := newPipeServer(t, func(_, _ int, q *dns.Msg) action {
		if strings.HasPrefix(q.Question[0].Name, "held") {
			return hold
		}
		return answer
	})
	cases := []struct {
		name  string
		held  int
		close func(f *Forwarder)
	}{
		{"Close", 0, func(f *Forwarder) { f.Close() }},
		{"Close while busy", 10, func(f *Forwarder) { f.Close() }},
		{"upstream leaves the list", 0, func(f *Forwarder) {
			list.Store(&[]string{"127.0.0.1:1"})
			f.Upstreams()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			list.Store(&[]string{srv.addr})
			before := runtime.NumGoroutine()
			f, u := pipeForwarder(t, srv.addr, func(c *Config) { c.Upstreams = listFunc(func() []string { return *list.Load() }) })
			for _, err := range askAll(context.Background(), f, u, "q", 300) {
				if err != nil {
					t.Fatal(err)
				}
			}
			read := int(srv.read.Load())
			held := make(chan []error, 1)
			go func() { held <- askAll(context.Background(), f, u, "held", tc.held) }()
			testkit.WaitEqual(t, 5*time.Second, "queries read", func() int { return int(srv.read.Load()) }, read+tc.held)

			tc.close(f)
			if tc.held == 0 {
				// close waited for them to finish; they may still be
				// returning.
				testkit.WaitEqual(t, time.Second, "pipelined goroutines after close", pipeGoroutines, 0)
			}
			srv.release()
			for _, err := range <-held {
				if err != nil {
					t.Error(err)
				}
			}
			testkit.WaitEqual(t, 5*time.Second, "pipelined goroutines", pipeGoroutines, 0)
			if err := askTCP(context.Background(), f, u, "after.example.org."); err != nil {
				t.Fatal(err)
			}
			if n := u.tcp.pipe.count(); n != 0 {
				t.Errorf("a query after close left %d pipelined connections", n)
			}
			// The server's goroutine of the last connection ends when it
			// reads the close.
			testkit.WaitFor(t, 5*time.Second, func() error {
				if now := runtime.NumGoroutine(); now > before {
					return fmt.Errorf("%d goroutines, %d before the Forwarder", now, before)
				}
				return nil
			})
		})
	}
}

type listFunc func() []string

func (l listFunc) Upstreams() []string { return l() }

// TestPipelineExchange: Exchange pipelines over TCP through a miekg/dns
// server, which answers a connection's queries one at a time.
func TestPipelineExchange(t *testing.T) {
	up := testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		_ = w.WriteMsg(new(dns.Msg).SetReply(q))
	}))
	f, _ := pipeForwarder(t, up.Addr, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if _, err := f.Exchange(context.Background(), new(dns.Msg).SetQuestion(fmt.Sprintf("q%d.example%d.org.", i, i), dns.TypeA)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := clientsOf(up); n > 1 {
		t.Errorf("%d client connections, want 1", n)
	}
}

func clientsOf(up *testkit.Upstream) int {
	seen := map[string]bool{}
	for _, q := range up.Queries() {
		if q.Net == "tcp" {
			seen[q.From.String()] = true
		}
	}
	return len(seen)
}

// BenchmarkTCPQuery: TCP queries in flight from 16 goroutines per CPU to
// a server that answers each connection's queries as they come, over
// pipelined connections and over one connection per query in flight.
func BenchmarkTCPQuery(b *testing.B) {
	srv := newPipeServer(b, func(int, int, *dns.Msg) action { return answer })
	for _, bc := range []struct {
		name     string
		pipeline bool
	}{{"per-query", false}, {"pipelined", true}} {
		b.Run(bc.name, func(b *testing.B) {
			f, u := pipeForwarder(b, srv.addr, func(c *Config) { c.Pipeline = bc.pipeline })
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				m := new(dns.Msg).SetQuestion("bench.example.org.", dns.TypeTXT)
				for pb.Next() {
					if _, err := f.query(context.Background(), u, m, true); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
