package forward_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

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
					addr = runStub(t, tc.replies).Addr
				}
				cfg.Upstreams = forward.StaticUpstreams{addr}
				f := newForwarder(t, cfg)
				reg := testkit.Registry(t, f)
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
				m := testkit.Gather(t, reg)
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
		check  func(counts []int) bool
	}{
		{forward.PolicySequential, func(c []int) bool { return c[0] == 30 && c[1] == 0 && c[2] == 0 }},
		{forward.PolicyRoundRobin, func(c []int) bool { return c[0] == 10 && c[1] == 10 && c[2] == 10 }},
		{forward.PolicyRandom, func(c []int) bool { return c[0] > 0 && c[1] > 0 && c[2] > 0 && c[0]+c[1]+c[2] == 30 }},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			var ups []*testkit.Upstream
			var addrs forward.StaticUpstreams
			for range 3 {
				s := testkit.NewUpstream(t, answering, testkit.UDPOnly())
				ups = append(ups, s)
				addrs = append(addrs, s.Addr)
			}
			f := newForwarder(t, forward.Config{Upstreams: addrs, Policy: tc.policy})
			for range 30 {
				if _, err := ask(f, context.Background(), "www.example.org."); err != nil {
					t.Fatal(err)
				}
			}
			counts := []int{asked(ups[0]), asked(ups[1]), asked(ups[2])}
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
	ln := testkit.ListenTCP(t)
	s := &tcpStub{addr: ln.Addr().String()}
	testkit.Accept(t, ln, func(c net.Conn) {
		s.accepted.Add(1)
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
		testkit.WaitFor(t, 2*time.Second, func() error {
			if n := up.closed.Load(); n != 1 {
				return fmt.Errorf("%d connections closed, want the idle one closed after Expire", n)
			}
			return nil
		})
		if _, err := ask(f, context.Background(), "www.example.org."); err != nil || up.accepted.Load() != 2 {
			t.Errorf("after expiry: %v, %d connections, want a new one", err, up.accepted.Load())
		}
	})
}

// TestTruncatedGoesTCP: a truncated UDP reply is asked again over TCP on
// the same port.
func TestTruncatedGoesTCP(t *testing.T) {
	up := testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r := answer(req)
		if w.RemoteAddr().Network() == "udp" {
			r.Answer, r.Truncated = nil, true
		}
		_ = w.WriteMsg(r)
	}))
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}})
	r, err := ask(f, context.Background(), "big.example.org.")
	if err != nil || len(r.Answer) != 1 || r.Truncated {
		t.Fatalf("%v %v, want the TCP answer", r, err)
	}
	var nets []string
	for _, q := range up.Queries() {
		nets = append(nets, q.Net)
	}
	if !slices.Equal(nets, []string{"udp", "tcp"}) {
		t.Errorf("queries over %v; want one over UDP, then one over TCP", nets)
	}
}

func TestShedRcode(t *testing.T) {
	up, _ := heldUpstream(t)
	for _, tc := range []struct {
		name string
		cfg  int
		want int
	}{{"default", 0, dns.RcodeServerFailure}, {"refused", dns.RcodeRefused, dns.RcodeRefused}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, MaxConcurrent: 1, ShedRcode: tc.cfg})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			reg := testkit.Registry(t, f)
			go func() { defer close(done); _, _ = ask(f, ctx, "held.example.org.") }()
			testkit.WaitFor(t, time.Second, func() error {
				if n := testkit.Gather(t, reg)[`dnsconfigurer_forward_in_flight{zone="."}`]; n != 1 {
					return fmt.Errorf("%v queries in flight, want 1", n)
				}
				return nil
			})
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
	root := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{"127.0.0.1:1"}, Zone: "."})
	corp := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{"127.0.0.1:1"}, Zone: "corp.example."})
	m := testkit.Gather(t, testkit.Registry(t, root, corp))
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
	f := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{s.Addr}, Zone: "."})
	reg := testkit.Registry(t, f)
	for _, name := range []string{"a.example.", "b.example.", "nx.example.", "odd.example."} {
		if _, err := ask(f, context.Background(), name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	m := testkit.Gather(t, reg)
	for _, tc := range []struct {
		rcode string
		want  float64
	}{{"NOERROR", 2}, {"NXDOMAIN", 1}, {"other", 1}} {
		labels := `{rcode="` + tc.rcode + `",upstream="` + s.Addr + `",zone="."}`
		if got := m["dnsconfigurer_forward_request_duration_seconds_count"+labels]; got != tc.want {
			t.Errorf("request_duration_seconds%s count = %v, want %v", labels, got, tc.want)
		}
		if got := m["dnsconfigurer_forward_responses_total"+labels]; got != tc.want {
			t.Errorf("responses_total%s = %v, want %v", labels, got, tc.want)
		}
	}
}
