package forward_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// stub is a UDP upstream on 127.0.0.1 whose replies a function chooses:
// none (it hangs), a wrong one then the right one, and so on.
type stub struct {
	addr    string
	queries atomic.Int64
	mu      sync.Mutex
	ports   map[string]bool // client addresses seen
}

func (s *stub) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ports)
}

// answer is the right reply to req: 192.0.2.1.
func answer(req *dns.Msg) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(req)
	r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
		A: net.IPv4(192, 0, 2, 1)}}
	return r
}

func runStub(t *testing.T, replies func(req *dns.Msg) []*dns.Msg) *stub {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stub{addr: pc.LocalAddr().String(), ports: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if req.Unpack(buf[:n]) != nil || len(req.Question) != 1 {
				continue
			}
			if !strings.HasSuffix(req.Question[0].Name, ".loop-probe.dnsconfigurer.") {
				s.queries.Add(1)
			}
			s.mu.Lock()
			s.ports[from.String()] = true
			s.mu.Unlock()
			for _, r := range replies(req) {
				b, _ := r.Pack()
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return s
}

func ask(f *forward.Forwarder, ctx context.Context, name string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return f.Exchange(ctx, m)
}

// await polls cond every millisecond until it holds or within is over.
func await(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReplyValidation: over UDP and over TCP, a reply with another ID or
// another question (or the query echoed) is dropped, counted, and the read
// goes on to the matching reply; with only wrong replies the exchange fails
// at the timeout.
func TestReplyValidation(t *testing.T) {
	cases := []struct {
		name    string
		replies func(req *dns.Msg) []*dns.Msg
		ok      bool
	}{
		{"wrong id first", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Id++
			return []*dns.Msg{bad, answer(req)}
		}, true},
		{"wrong question first", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Question[0].Name = "other.example."
			return []*dns.Msg{bad, answer(req)}
		}, true},
		{"wrong type first", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Question[0].Qtype = dns.TypeAAAA
			return []*dns.Msg{bad, answer(req)}
		}, true},
		{"name in other case first", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Question[0].Name = strings.ToUpper(bad.Question[0].Name)
			return []*dns.Msg{bad, answer(req)}
		}, true},
		{"error without question first", func(req *dns.Msg) []*dns.Msg {
			bad := new(dns.Msg)
			bad.SetRcode(req, dns.RcodeServerFailure)
			bad.Question = nil
			return []*dns.Msg{bad, answer(req)}
		}, true},
		{"query echoed first", func(req *dns.Msg) []*dns.Msg {
			return []*dns.Msg{req.Copy(), answer(req)}
		}, true},
		{"only wrong ids", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Id++
			return []*dns.Msg{bad}
		}, false},
		{"only wrong questions", func(req *dns.Msg) []*dns.Msg {
			bad := answer(req)
			bad.Question[0].Name = "other.example."
			return []*dns.Msg{bad}
		}, false},
	}
	for _, transport := range []string{"udp", "tcp"} {
		for _, tc := range cases {
			t.Run(transport+"/"+tc.name, func(t *testing.T) {
				cfg := forward.Config{Timeout: 300 * time.Millisecond}
				var addr string
				if transport == "tcp" {
					addr = runTCPStubReplies(t, tc.replies).addr
					cfg.ForceTCP = true
				} else {
					addr = runStub(t, tc.replies).addr
				}
				cfg.Upstreams = forward.StaticUpstreams{addr}
				f := newForwarder(t, cfg)
				reg := prometheus.NewRegistry()
				reg.MustRegister(f)
				start := time.Now()
				r, err := ask(f, context.Background(), "www.example.org.")
				if tc.ok != (err == nil) {
					t.Fatalf("reply %v, error %v; want ok %v", r, err, tc.ok)
				}
				if tc.ok && (len(r.Answer) != 1 || r.Question[0].Name != "www.example.org.") {
					t.Errorf("reply %v, want the matching one", r)
				}
				if took := time.Since(start); !tc.ok && took < 250*time.Millisecond {
					t.Errorf("failed after %v: %v; want the 300ms timeout (a wrong reply is no answer)", took, err)
				}
				m := gather(t, reg)
				if n := m[`dnsconfigurer_forward_dropped_replies_total{upstream="`+addr+`",zone="."}`]; n != 1 {
					t.Errorf("dropped replies %v, want 1", n)
				}
				if n := m[`dnsconfigurer_forward_responses_total{rcode="NOERROR",upstream="`+addr+`",zone="."}`]; (n == 1) != tc.ok {
					t.Errorf("accepted replies %v, want ok %v", n, tc.ok)
				}
			})
		}
	}
}

func TestPolicy(t *testing.T) {
	cases := []struct {
		policy string
		check  func(counts []int64) bool
	}{
		{forward.PolicySequential, func(c []int64) bool { return c[0] == 30 && c[1] == 0 && c[2] == 0 }},
		{forward.PolicyRoundRobin, func(c []int64) bool { return c[0] == 10 && c[1] == 10 && c[2] == 10 }},
		{forward.PolicyRandom, func(c []int64) bool { return c[0] > 0 && c[1] > 0 && c[2] > 0 && c[0]+c[1]+c[2] == 30 }},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			var ups []*stub
			var addrs forward.StaticUpstreams
			for range 3 {
				s := runStub(t, func(req *dns.Msg) []*dns.Msg { return []*dns.Msg{answer(req)} })
				ups = append(ups, s)
				addrs = append(addrs, s.addr)
			}
			f := newForwarder(t, forward.Config{Upstreams: addrs, Policy: tc.policy})
			for range 30 {
				if _, err := ask(f, context.Background(), "www.example.org."); err != nil {
					t.Fatal(err)
				}
			}
			counts := []int64{ups[0].queries.Load(), ups[1].queries.Load(), ups[2].queries.Load()}
			if !tc.check(counts) {
				t.Errorf("queries per upstream %v", counts)
			}
		})
	}
}

// tcpStub is a TCP upstream that answers every query and counts the
// connections it accepted and those the client closed.
type tcpStub struct {
	addr                      string
	accepted, closed, queries atomic.Int64
}

func runTCPStub(t *testing.T, reply func(req *dns.Msg) *dns.Msg) *tcpStub {
	t.Helper()
	return runTCPStubReplies(t, func(req *dns.Msg) []*dns.Msg { return []*dns.Msg{reply(req)} })
}

// runTCPStubReplies is runTCPStub writing the replies a function chooses
// (none: it hangs) on the connection of each query.
func runTCPStubReplies(t *testing.T, replies func(req *dns.Msg) []*dns.Msg) *tcpStub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpStub{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				dc := &dns.Conn{Conn: c}
				for {
					req, err := dc.ReadMsg()
					if err != nil {
						if errors.Is(err, io.EOF) {
							s.closed.Add(1)
						}
						return
					}
					if len(req.Question) == 1 && !strings.HasSuffix(req.Question[0].Name, ".loop-probe.dnsconfigurer.") {
						s.queries.Add(1)
					}
					for _, r := range replies(req) {
						_ = dc.WriteMsg(r)
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// TestConnectionReuse: sequential TCP queries share one connection, which
// is closed once idle for Expire (UDP queries get a socket each:
// TestSourcePorts).
func TestConnectionReuse(t *testing.T) {
	t.Run("tcp", func(t *testing.T) {
		up := runTCPStub(t, answer)
		f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.addr}, ForceTCP: true, Expire: 100 * time.Millisecond, HealthCheck: 10 * time.Millisecond})
		for range 20 {
			if _, err := ask(f, context.Background(), "www.example.org."); err != nil {
				t.Fatal(err)
			}
		}
		if n := up.accepted.Load(); n != 1 {
			t.Errorf("%d TCP connections for 20 queries, want 1", n)
		}
		// The background work closes idle connections (its loop probe
		// reuses this one).
		f.Start(context.Background())
		await(t, 2*time.Second, "the idle connection closed after Expire", func() bool { return up.closed.Load() == 1 })
		if _, err := ask(f, context.Background(), "www.example.org."); err != nil || up.accepted.Load() != 2 {
			t.Errorf("after expiry: %v, %d connections, want a new one", err, up.accepted.Load())
		}
	})
}

// TestTruncatedGoesTCP: a truncated UDP reply is asked again over TCP on
// the same port.
func TestTruncatedGoesTCP(t *testing.T) {
	tcp := runTCPStub(t, answer)
	pc, err := net.ListenPacket("udp", tcp.addr)
	if err != nil {
		t.Skipf("UDP port of the TCP stub busy: %v", err)
	}
	var udpQueries atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req := new(dns.Msg)
			if req.Unpack(buf[:n]) != nil {
				continue
			}
			udpQueries.Add(1)
			r := new(dns.Msg)
			r.SetReply(req)
			r.Truncated = true
			b, _ := r.Pack()
			_, _ = pc.WriteTo(b, from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{tcp.addr}})
	r, err := ask(f, context.Background(), "big.example.org.")
	if err != nil || len(r.Answer) != 1 || r.Truncated {
		t.Fatalf("%v %v, want the TCP answer", r, err)
	}
	if u, c := udpQueries.Load(), tcp.accepted.Load(); u != 1 || c != 1 {
		t.Errorf("%d UDP queries, %d TCP connections; want 1 and 1", u, c)
	}
}

func TestShedRcode(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	up, _ := heldUpstream(t, release)
	// After the server is made, so it runs before its shutdown (which waits
	// for the handlers held on release).
	t.Cleanup(unblock)
	for _, tc := range []struct {
		name string
		cfg  int
		want int
	}{{"default", 0, dns.RcodeServerFailure}, {"refused", dns.RcodeRefused, dns.RcodeRefused}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up}, MaxConcurrent: 1, ShedRcode: tc.cfg})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			reg := prometheus.NewRegistry()
			reg.MustRegister(f)
			go func() { defer close(done); _, _ = ask(f, ctx, "held.example.org.") }()
			await(t, time.Second, "one query in flight", func() bool { return gather(t, reg)[`dnsconfigurer_forward_in_flight{zone="."}`] == 1 })
			_, err := ask(f, context.Background(), "other.example.org.")
			cancel()
			<-done
			if !errors.Is(err, forward.ErrOverloaded) || forward.Rcode(err) != tc.want {
				t.Errorf("%v, rcode %d; want ErrOverloaded, %d", err, forward.Rcode(err), tc.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	ok := forward.StaticUpstreams{"127.0.0.1"}
	cases := []struct {
		cfg  forward.Config
		want string
	}{
		{forward.Config{}, "Upstreams: missing"},
		{forward.Config{Upstreams: ok, Timeout: -1}, "Timeout: negative"},
		{forward.Config{Upstreams: ok, Policy: "least_loaded"}, `Policy: "least_loaded"`},
		{forward.Config{Upstreams: ok, MaxFails: -2}, "MaxFails"},
		{forward.Config{Upstreams: ok, HealthCheck: -time.Second}, "HealthCheck"},
		{forward.Config{Upstreams: ok, Expire: -time.Second}, "Expire"},
		{forward.Config{Upstreams: ok, ForceTCP: true, PreferUDP: true}, "PreferUDP: not with ForceTCP"},
		{forward.Config{Upstreams: ok, MaxConcurrent: -1}, "MaxConcurrent"},
		{forward.Config{Upstreams: ok, ShedRcode: dns.RcodeNameError}, "ShedRcode"},
		{forward.Config{Upstreams: ok, LoopOptionCode: 8}, "LoopOptionCode"},
		{forward.Config{Upstreams: ok, Zone: "a..b"}, "Zone"},
		{forward.Config{Upstreams: ok, Self: []string{"nonsense"}}, `Self[0] "nonsense"`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			_, err := forward.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestZonesShareRegistry: one Forwarder per zone on one registry.
func TestZonesShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, z := range []string{".", "corp.example."} {
		f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{"127.0.0.1:1"}, Zone: z})
		if err := reg.Register(f); err != nil {
			t.Fatalf("zone %s: %v", z, err)
		}
	}
	m := gather(t, reg)
	if _, ok := m[`dnsconfigurer_forward_in_flight{zone="corp.example."}`]; !ok {
		t.Errorf("no series for zone corp.example.: %v", m)
	}
}

// TestRepliesByRcode: each accepted reply is counted and timed under its
// upstream and rcode (CoreDNS's coredns_forward_request_duration_seconds
// {to,rcode}).
func TestRepliesByRcode(t *testing.T) {
	s := runStub(t, func(req *dns.Msg) []*dns.Msg {
		r := answer(req)
		switch {
		case strings.HasPrefix(req.Question[0].Name, "nx."):
			r.Answer, r.Rcode = nil, dns.RcodeNameError
		case strings.HasPrefix(req.Question[0].Name, "odd."):
			r.Answer, r.Rcode = nil, 13 // unnamed
		}
		return []*dns.Msg{r}
	})
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{s.addr}, Zone: "."})
	reg := prometheus.NewRegistry()
	reg.MustRegister(f)
	for _, name := range []string{"a.example.", "b.example.", "nx.example.", "odd.example."} {
		if _, err := ask(f, context.Background(), name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	m := gather(t, reg)
	for _, tc := range []struct {
		rcode string
		want  float64
	}{{"NOERROR", 2}, {"NXDOMAIN", 1}, {"other", 1}} {
		labels := `{rcode="` + tc.rcode + `",upstream="` + s.addr + `",zone="."}`
		if got := m["dnsconfigurer_forward_request_duration_seconds"+labels+"_count"]; got != tc.want {
			t.Errorf("request_duration_seconds%s count = %v, want %v", labels, got, tc.want)
		}
		if got := m["dnsconfigurer_forward_responses_total"+labels]; got != tc.want {
			t.Errorf("responses_total%s = %v, want %v", labels, got, tc.want)
		}
	}
}
