package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// loopAnswerBound is how long a looping query may take to be answered: one
// lap on loopback, far under the forwarding timeout (2s) it took when the
// answer cache held the query that came back.
const loopAnswerBound = 500 * time.Millisecond

// stackServer is the answer stack buildStack makes for a config (answer
// cache, router, forwarders, as serve runs them) served over UDP and TCP.
type stackServer struct {
	addr  string
	stack *answerStack
	log   *testkit.Buffer
}

// startStackServers starts a DNS server on each of listen (127.0.0.x:0),
// then builds each one's answer stack with upstreams(addrs)[i] as its
// only forward route's upstream, addrs being the servers' addresses. The
// servers answer nothing until every stack is built and the start-up loop
// probes sent to them were dropped, as when the peer is not up yet.
func startStackServers(t *testing.T, listen []string, upstreams func(addrs []string) []string) []*stackServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var handlers []*atomic.Pointer[Handler]
	var dropped []*atomic.Int64
	var addrs []string
	for _, l := range listen {
		h := new(atomic.Pointer[Handler])
		n := new(atomic.Int64)
		srv := &dnsserver.Server{Listen: []string{l}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			if h := h.Load(); h != nil {
				h.ServeDNS(w, r)
				return
			}
			n.Add(1)
		})}
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown(context.Background()) })
		handlers = append(handlers, h)
		dropped = append(dropped, n)
		addrs = append(addrs, srv.Addrs()[0])
	}
	ups := upstreams(addrs)
	var out []*stackServer
	for i, addr := range addrs {
		cfg := &v1alpha1.ServerConfiguration{Listen: []string{addr}, Objects: "x",
			Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{ups[i]}}}}
		st := emptyStore(t, cfg)
		var logs testkit.Buffer
		stack, err := buildStack(ctx, cfg, stores{cluster: st}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stack.stop)
		out = append(out, &stackServer{addr: addr, stack: stack, log: &logs})
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		for i, s := range out {
			// One no one has as an upstream is asked nothing.
			if slices.Contains(ups, s.addr) && dropped[i].Load() == 0 {
				return fmt.Errorf("%s: no start-up loop probe", s.addr)
			}
		}
		return nil
	})
	for i, s := range out {
		handlers[i].Store(s.stack.handler)
	}
	return out
}

// emptyStore sets cfg's defaults, validates it and returns its record
// store, published empty.
func emptyStore(t *testing.T, cfg *v1alpha1.ServerConfiguration) *store.Store {
	t.Helper()
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(store.Options{Zone: cfg.ClusterDomain, TTL: cfg.RecordTTL()})
	if err != nil {
		t.Fatal(err)
	}
	st.Publish()
	return st
}

// metric is the sum of the series of the stack's metric name.
func (s *stackServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	return testkit.Gather(t, s.stack.gatherers()).Sum(name)
}

// plainUpstream answers every question with 192.0.2.8 over UDP and TCP.
func plainUpstream(t *testing.T) string {
	t.Helper()
	return testkit.NewUpstream(t, testkit.Reply(func(q dns.Question, r *dns.Msg) {
		r.Answer = []dns.RR{testkit.A(q.Name, 30, "192.0.2.8")}
	})).Addr
}

// TestStackForwardingLoop runs two answer stacks as serve builds them
// (answer cache on, as shipped) whose upstreams point at each other: a
// query to either, over UDP and TCP, is answered SERVFAIL within one lap,
// each counts and logs the loop at error level naming its upstream, and
// neither marks its upstream down. Then a chain A -> B -> plain upstream
// answers and finds no loop. Figures: go test -run TestStackForwardingLoop -v
func TestStackForwardingLoop(t *testing.T) {
	t.Run("loop", func(t *testing.T) {
		s := startStackServers(t, []string{"127.0.0.2:0", "127.0.0.3:0"}, func(a []string) []string { return []string{a[1], a[0]} })
		for i, name := range []string{"loop-udp.example.org.", "loop-tcp.example.org."} {
			network := [...]string{"udp", "tcp"}[i]
			for _, srv := range s {
				start := time.Now()
				r := testkit.Ask(t, network, srv.addr, new(dns.Msg).SetQuestion(name, dns.TypeA))
				took := time.Since(start)
				t.Logf("%s to %s: %s after %v", network, srv.addr, dns.RcodeToString[r.Rcode], took.Round(time.Microsecond))
				if r.Rcode != dns.RcodeServerFailure || took > loopAnswerBound {
					t.Errorf("%s to %s: %s after %v, want SERVFAIL within %v", network, srv.addr, dns.RcodeToString[r.Rcode], took, loopAnswerBound)
				}
			}
		}
		for i, srv := range s {
			peer := s[1-i].addr
			if v := srv.metric(t, "dnsconfigurer_forward_loops_total"); v < 2 {
				t.Errorf("%s: forward_loops_total %v, want at least 2 (a UDP and a TCP query)", srv.addr, v)
			}
			if v := srv.metric(t, "dnsconfigurer_forward_loop_detected_total"); v != 1 {
				t.Errorf("%s: forward_loop_detected_total %v, want 1", srv.addr, v)
			}
			logs := srv.log.String()
			if !strings.Contains(logs, "level=ERROR msg=\"forwarding loop: a query sent to this upstream came back to this server; answering SERVFAIL\"") ||
				!strings.Contains(logs, "upstream="+peer) {
				t.Errorf("%s: no error naming upstream %s:\n%s", srv.addr, peer, logs)
			}
			for _, bad := range []string{"upstream down", "up again"} {
				if strings.Contains(logs, bad) {
					t.Errorf("%s logs %q for a loop:\n%s", srv.addr, bad, logs)
				}
			}
		}
	})
	t.Run("chain", func(t *testing.T) {
		up := plainUpstream(t)
		s := startStackServers(t, []string{"127.0.0.2:0", "127.0.0.3:0"}, func(a []string) []string { return []string{a[1], up} })
		for _, network := range []string{"udp", "tcp"} {
			for _, srv := range s {
				r := testkit.Ask(t, network, srv.addr, new(dns.Msg).SetQuestion("chain-"+network+".example.org.", dns.TypeA))
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					t.Fatalf("%s to %s: %v, want the upstream's answer", network, srv.addr, r)
				}
			}
		}
		for _, srv := range s {
			for _, name := range []string{"dnsconfigurer_forward_loops_total", "dnsconfigurer_forward_loop_detected_total", "dnsconfigurer_forward_looping_upstreams"} {
				if v := srv.metric(t, name); v != 0 {
					t.Errorf("%s: %s %v in a chain without a loop", srv.addr, name, v)
				}
			}
			if strings.Contains(srv.log.String(), "loop") {
				t.Errorf("%s logs a loop in a chain:\n%s", srv.addr, srv.log.String())
			}
		}
	})
}

// TestForwardingKey: a reload keeps the forwarders and the cache exactly
// when the settings they are built from are unchanged.
func TestForwardingKey(t *testing.T) {
	base := func() *v1alpha1.ServerConfiguration {
		return &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.1:53"}, Objects: "x",
			Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{"10.0.0.53"}}}}
	}
	two := 2
	for _, tc := range []struct {
		name   string
		change func(c *v1alpha1.ServerConfiguration)
		same   bool
	}{
		{"nothing", func(*v1alpha1.ServerConfiguration) {}, true},
		{"a default spelled out", func(c *v1alpha1.ServerConfiguration) { c.Forward[0].MaxFails = &two }, true},
		{"loadbalance", func(c *v1alpha1.ServerConfiguration) { f := false; c.Loadbalance = &f }, true},
		{"overrides", func(c *v1alpha1.ServerConfiguration) {
			c.Overrides = []v1alpha1.Override{{Name: "a.example", Addresses: []string{"192.0.2.1"}}}
		}, true},
		{"reverse zones", func(c *v1alpha1.ServerConfiguration) { c.ReverseZones = []string{"10.96.0.0/12"} }, true},
		{"upstream", func(c *v1alpha1.ServerConfiguration) { c.Forward[0].Upstreams = []string{"10.0.0.54"} }, false},
		{"a route", func(c *v1alpha1.ServerConfiguration) {
			c.Forward = append(c.Forward, v1alpha1.ForwardRoute{Zone: "corp.example", Upstreams: []string{"10.1.0.53"}})
		}, false},
		{"policy", func(c *v1alpha1.ServerConfiguration) { c.Forward[0].Policy = v1alpha1.PolicySequential }, false},
		{"maxConcurrent", func(c *v1alpha1.ServerConfiguration) { c.MaxConcurrent = 10 }, false},
		{"shedRcode", func(c *v1alpha1.ServerConfiguration) { c.ShedRcode = v1alpha1.ShedRefused }, false},
		{"cache size", func(c *v1alpha1.ServerConfiguration) { c.Cache.SuccessBytes = "64Mi" }, false},
		{"serve stale", func(c *v1alpha1.ServerConfiguration) { c.Cache.ServeStale = "1h" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.change(b)
			a.SetDefaults()
			b.SetDefaults()
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
			if same := forwardingKey(a) == forwardingKey(b); same != tc.same {
				t.Errorf("same key %v, want %v", same, tc.same)
			}
		})
	}
}

// TestStackSharedResolvConf: two routes that take their upstreams from the
// same resolv.conf (AKS's coredns-custom pattern, "forward .
// /etc/resolv.conf" in two server blocks) share one watcher of the file:
// the stack builds, and both routes use the file's nameserver. Before,
// the second watcher's metrics collided and serve exited.
func TestStackSharedResolvConf(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	testkit.WriteFile(t, resolv, "nameserver 127.0.0.7\n")
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.2:0"}, Objects: "x",
		Forward: []v1alpha1.ForwardRoute{{Zone: ".", Upstreams: []string{resolv}}, {Zone: "corp.example", Upstreams: []string{resolv}}}}
	stack, err := buildStack(context.Background(), cfg, stores{cluster: emptyStore(t, cfg)}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("two routes to one resolv.conf: %v", err)
	}
	t.Cleanup(stack.stop)
	m := testkit.Gather(t, stack.gatherers())
	for _, zone := range []string{".", "corp.example."} {
		key := testkit.Key("dnsconfigurer_forward_upstream_healthy", "zone", zone, "upstream", "127.0.0.7:53")
		if _, ok := m[key]; !ok {
			t.Errorf("no %s among the stack's metrics", key)
		}
	}
}

// TestStackStaticTTLCap: hosts entries are answered with TTLs capped at the
// reply cache's maxTTL of their name's route, as CoreDNS's cache caps every
// answer of its block; a route without a cache leaves them.
func TestStackStaticTTLCap(t *testing.T) {
	cfg := &v1alpha1.ServerConfiguration{Listen: []string{"127.0.0.2:0"}, Objects: "x",
		Cache: v1alpha1.ServerCache{CacheTTLs: v1alpha1.CacheTTLs{MaxTTL: "30s"}},
		Forward: []v1alpha1.ForwardRoute{
			{Zone: ".", Upstreams: []string{"127.0.0.7"}},
			{Zone: "corp.example", Upstreams: []string{"127.0.0.7"}, Cache: &v1alpha1.RouteCache{CacheTTLs: v1alpha1.CacheTTLs{MaxTTL: "5s"}}},
			{Zone: "off.example", Upstreams: []string{"127.0.0.7"}, Cache: &v1alpha1.RouteCache{Disabled: true}},
		},
		Overrides: []v1alpha1.Override{
			{Name: "a.corp.example", Addresses: []string{"10.1.2.3"}},
			{Name: "b.example", Addresses: []string{"10.1.2.4"}},
			{Name: "c.off.example", Addresses: []string{"10.1.2.5"}},
			{Name: "d.example", Addresses: []string{"10.1.2.6"}, TTL: "10s"},
		}}
	stack, err := buildStack(context.Background(), cfg, stores{cluster: emptyStore(t, cfg)}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.stop)
	for _, tc := range []struct {
		name string
		ttl  uint32
	}{{"a.corp.example.", 5}, {"b.example.", 30}, {"c.off.example.", 3600}, {"d.example.", 10}} {
		r := stack.handler.Resolve(context.Background(), dns.Question{Name: tc.name, Qtype: dns.TypeA, Qclass: dns.ClassINET})
		if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != tc.ttl {
			t.Errorf("%s: %v, want one record of TTL %d", tc.name, r.Answer, tc.ttl)
		}
	}
}
