package testkit

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Upstream is a fake DNS server: UDP and TCP on one port of 127.0.0.1,
// answering with a handler, counting and keeping what it gets.
type Upstream struct {
	Addr string // host:port, the same for UDP and TCP

	h       dns.Handler
	delay   atomic.Int64 // nanoseconds before each answer
	count   atomic.Int64
	record  bool
	mu      sync.Mutex
	queries []Query
	servers []*dns.Server
	// blackhole is Silent's UDP socket, read without a dns.Server.
	blackhole net.PacketConn
	done      chan struct{} // closed by Stop: ends the delays
	stop      sync.Once
	served    sync.WaitGroup
}

// Query is one query an Upstream got.
type Query struct {
	Msg  *dns.Msg
	Net  string // "udp" or "tcp"
	From net.Addr
}

type upstreamConfig struct {
	addr      string
	nets      []string
	listenIn  func(func() error) error
	tune      func(*dns.Server)
	delay     time.Duration
	countOnly bool
}

// UpstreamOption changes how NewUpstream listens.
type UpstreamOption func(*upstreamConfig)

// At listens on addr instead of 127.0.0.1:0 (port 0 picks one, the same
// for both transports).
func At(addr string) UpstreamOption { return func(c *upstreamConfig) { c.addr = addr } }

// UDPOnly listens on UDP only: TCP connections to the port are refused.
func UDPOnly() UpstreamOption { return func(c *upstreamConfig) { c.nets = []string{"udp"} } }

// ListenIn opens the sockets inside do, such as a network namespace's Do.
func ListenIn(do func(func() error) error) UpstreamOption {
	return func(c *upstreamConfig) { c.listenIn = do }
}

// Tune sets fields of each dns.Server before it starts (MaxTCPQueries,
// timeouts).
func Tune(f func(*dns.Server)) UpstreamOption { return func(c *upstreamConfig) { c.tune = f } }

// CountOnly keeps no query, only their count: for load tests.
func CountOnly() UpstreamOption { return func(c *upstreamConfig) { c.countOnly = true } }

// Delay holds every answer for d (SetDelay changes it later).
func Delay(d time.Duration) UpstreamOption { return func(c *upstreamConfig) { c.delay = d } }

// NewUpstream starts an upstream answering with h; it stops when t ends.
func NewUpstream(t testing.TB, h dns.Handler, opts ...UpstreamOption) *Upstream {
	t.Helper()
	c := upstreamConfig{addr: "127.0.0.1:0", nets: []string{"udp", "tcp"},
		listenIn: func(f func() error) error { return f() }}
	for _, o := range opts {
		o(&c)
	}
	u := &Upstream{h: h, done: make(chan struct{}), record: !c.countOnly}
	u.delay.Store(int64(c.delay))
	var pc net.PacketConn
	var ln net.Listener
	err := c.listenIn(func() (err error) {
		pc, ln, err = listen(c.addr, c.nets)
		return err
	})
	if err != nil {
		t.Fatalf("fake upstream on %s: %v", c.addr, err)
	}
	handler := dns.HandlerFunc(u.serve)
	_, silent := h.(silentHandler)
	switch {
	case pc != nil && silent:
		// A blackhole: one reader, nothing parsed, so that a flood of
		// queries costs the code under test no CPU here.
		u.Addr = pc.LocalAddr().String()
		u.blackhole = pc
		u.served.Add(1)
		go func() {
			defer u.served.Done()
			buf := make([]byte, 65535)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				u.count.Add(1)
			}
		}()
	case pc != nil:
		u.Addr = pc.LocalAddr().String()
		u.servers = append(u.servers, &dns.Server{PacketConn: pc, Handler: handler})
	}
	if ln != nil {
		u.Addr = ln.Addr().String()
		u.servers = append(u.servers, &dns.Server{Listener: ln, Handler: handler})
	}
	for _, s := range u.servers {
		if c.tune != nil {
			c.tune(s)
		}
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		u.served.Add(1)
		go func() {
			defer u.served.Done()
			_ = s.ActivateAndServe()
		}()
		<-started
	}
	t.Cleanup(u.Stop)
	return u
}

// listen opens UDP and TCP on one port; with port 0 it tries again when
// the port UDP got is taken for TCP.
func listen(addr string, nets []string) (net.PacketConn, net.Listener, error) {
	for range 20 {
		pc, ln, err := listenOnce(addr, nets)
		if err == nil || !strings.HasSuffix(addr, ":0") || !errors.Is(err, syscall.EADDRINUSE) {
			return pc, ln, err
		}
	}
	return listenOnce(addr, nets)
}

func listenOnce(addr string, nets []string) (net.PacketConn, net.Listener, error) {
	var pc net.PacketConn
	var ln net.Listener
	for _, n := range nets {
		var err error
		switch n {
		case "udp":
			pc, err = net.ListenPacket("udp", addr)
			if err == nil {
				addr = pc.LocalAddr().String()
			}
		case "tcp":
			ln, err = net.Listen("tcp", addr)
			if err == nil {
				addr = ln.Addr().String()
			}
		}
		if err != nil {
			if pc != nil {
				pc.Close()
			}
			return nil, nil, fmt.Errorf("%s: %w", n, err)
		}
	}
	return pc, ln, nil
}

func (u *Upstream) serve(w dns.ResponseWriter, req *dns.Msg) {
	if u.record {
		q := Query{Msg: req.Copy(), Net: "udp", From: w.RemoteAddr()}
		if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
			q.Net = "tcp"
		}
		u.mu.Lock()
		u.queries = append(u.queries, q)
		u.mu.Unlock()
	}
	u.count.Add(1)
	if d := time.Duration(u.delay.Load()); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-u.done:
			timer.Stop()
			return
		}
	}
	u.h.ServeDNS(w, req)
}

// SetDelay holds every later answer for d.
func (u *Upstream) SetDelay(d time.Duration) { u.delay.Store(int64(d)) }

// Count is the number of queries it got.
func (u *Upstream) Count() int { return int(u.count.Load()) }

// Queries are the queries it got, in order (none with CountOnly).
func (u *Upstream) Queries() []Query {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Query(nil), u.queries...)
}

// Stop closes the sockets and waits for the handlers to return; the
// upstream then refuses TCP and drops UDP. It is called when t ends.
func (u *Upstream) Stop() {
	u.stop.Do(func() {
		close(u.done)
		for _, s := range u.servers {
			_ = s.Shutdown()
		}
		if u.blackhole != nil {
			u.blackhole.Close()
		}
		u.served.Wait()
	})
}

// Reply is a handler that answers each query with fill's reply: fill
// gets the question and a reply already made by SetReply.
func Reply(fill func(q dns.Question, r *dns.Msg)) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(req)
		fill(req.Question[0], r)
		_ = w.WriteMsg(r)
	})
}

// AnswerA is a handler of a recursive resolver's replies: A ip (ttl) to an
// A query, no data to other types, and no reply at all to a query of one
// question whose name silent reports (nil: none).
func AnswerA(ttl uint32, ip string, silent func(name string) bool) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if len(req.Question) != 1 || silent != nil && silent(req.Question[0].Name) {
			return
		}
		r := new(dns.Msg)
		r.SetReply(req)
		r.RecursionAvailable = true
		if q := req.Question[0]; q.Qtype == dns.TypeA {
			r.Answer = []dns.RR{A(q.Name, ttl, ip)}
		}
		_ = w.WriteMsg(r)
	})
}

// Silent is a handler that never answers. Over UDP its queries are only
// counted, not kept (Queries has none), and cost next to nothing: a
// blackhole for floods.
var Silent dns.Handler = silentHandler{}

type silentHandler struct{}

func (silentHandler) ServeDNS(dns.ResponseWriter, *dns.Msg) {}

// A is an A record of name with ttl.
func A(name string, ttl uint32, ip string) *dns.A {
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip).To4()}
}

// RefusedAddr is a 127.0.0.1 port with no socket (one just released): a
// UDP query sent there is refused at once (ICMP port unreachable).
func RefusedAddr(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

// FreeAddr is a host:port free for both UDP and TCP when called, for a
// server not started yet (another process may take it in between: that
// server then fails to start, the test does not pass wrongly).
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	pc, ln, err := listen(net.JoinHostPort(host, "0"), []string{"udp", "tcp"})
	if err != nil {
		t.Fatalf("no port of %s free for UDP and TCP: %v", host, err)
	}
	pc.Close()
	ln.Close()
	return pc.LocalAddr().String()
}
