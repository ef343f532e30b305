package nodelocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startUpstream is a fake cluster DNS on 127.0.0.1 answering with answer.
func startUpstream(t *testing.T, answer func(q dns.Question, r *dns.Msg)) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(req)
		answer(req.Question[0], r)
		if o := req.IsEdns0(); o != nil {
			r.SetEdns0(4096, false)
			// echo the option back, as a careless server might
			r.IsEdns0().Option = o.Option
		}
		// Like a real server, never send more than the asker can receive
		// (a miekg/dns client reads UDP into a buffer of the size it
		// advertised): the node-local stage then retries over TCP.
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		r.Truncate(dnsmsg.ReplySize(req.IsEdns0(), tcp))
		w.WriteMsg(r)
	}))
}

// autopathOptions are the autopath option values of the queries up got,
// "" where absent.
func autopathOptions(up *testkit.Upstream) []string {
	var out []string
	for _, q := range up.Queries() {
		opt := ""
		if o := q.Msg.IsEdns0(); o != nil {
			for _, e := range o.Option {
				if l, ok := e.(*dns.EDNS0_LOCAL); ok && l.Code == 65001 {
					opt = string(l.Data)
				}
			}
		}
		out = append(out, opt)
	}
	return out
}

func startNodeLocal(t *testing.T, up string, cfg Config) (*Handler, string) {
	t.Helper()
	// As serve wires it: the forwarder relays the stage's autopath option.
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up}, Timeout: time.Second, Policy: forward.PolicyRoundRobin,
		RelayOptions: []uint16{autopath.DefaultOptionCode}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(fwd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, testkit.StartServer(t, &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h})
}

// ask asks addr over netw; with edns or opts the query has EDNS0 (1232).
func ask(t *testing.T, addr, netw, name string, qtype uint16, edns bool, opts ...dns.EDNS0) *dns.Msg {
	t.Helper()
	var size uint16
	if edns || len(opts) > 0 {
		size = 1232
	}
	return testkit.Ask(t, netw, addr, testkit.NewQuery(name, qtype, size, opts...))
}

func answerA(ttl uint32) func(q dns.Question, r *dns.Msg) {
	return func(q dns.Question, r *dns.Msg) {
		switch q.Name {
		case "nx.example.":
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
				Ns: "ns.example.", Mbox: "h.example.", Minttl: 2}}
		case "fail.example.":
			r.Rcode = dns.RcodeServerFailure
		case "big.example.":
			for i := 0; i < 60; i++ {
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
					A: net.IPv4(10, 0, byte(i/256), byte(i%256))})
			}
		default:
			r.Answer = []dns.RR{testkit.A(q.Name, ttl, "192.0.2.1")}
		}
	}
}

func TestCache(t *testing.T) {
	up := startUpstream(t, answerA(300))
	h, addr := startNodeLocal(t, up.Addr, Config{Cache: dnscache.Config{MaxTTL: 30 * time.Second}})

	r := ask(t, addr, "udp", "web.example.", dns.TypeA, false)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
		t.Fatalf("first answer %v (TTL must be capped at 30)", r.Answer)
	}
	r = ask(t, addr, "udp", "WEB.Example.", dns.TypeA, false)
	if len(r.Answer) != 1 || r.Answer[0].Header().Name != "WEB.Example." || r.Question[0].Name != "WEB.Example." {
		t.Fatalf("cached answer must echo the asker's case: %v", r)
	}
	if n := up.Count(); n != 1 {
		t.Fatalf("upstream got %d queries, want 1", n)
	}
	// Negative answers are cached with the SOA minimum; SERVFAIL never.
	for i := 0; i < 3; i++ {
		if r := ask(t, addr, "tcp", "nx.example.", dns.TypeA, false); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Fatalf("nx: %v", r)
		}
		if r := ask(t, addr, "udp", "fail.example.", dns.TypeA, false); r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("fail: %v", r)
		}
	}
	if n := up.Count(); n != 1+1+3 {
		t.Fatalf("upstream got %d queries, want 5 (1 web, 1 nx, 3 fail)", n)
	}
	if h.Len() != 2 {
		t.Errorf("cache holds %d", h.Len())
	}
}

func TestCacheExpiry(t *testing.T) {
	up := startUpstream(t, answerA(1))
	_, addr := startNodeLocal(t, up.Addr, Config{})
	ask(t, addr, "udp", "short.example.", dns.TypeA, false)
	ask(t, addr, "udp", "short.example.", dns.TypeA, false)
	if up.Count() != 1 {
		t.Fatal("second query not cached")
	}
	testkit.WaitFor(t, 5*time.Second, func() error {
		ask(t, addr, "udp", "short.example.", dns.TypeA, false)
		if up.Count() == 1 {
			return errors.New("the entry with TTL 1 s never expired")
		}
		return nil
	})
}

func TestCoalescing(t *testing.T) {
	up := startUpstream(t, answerA(30))
	up.SetDelay(200 * time.Millisecond)
	_, addr := startNodeLocal(t, up.Addr, Config{})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := ask(t, addr, "udp", "slow.example.", dns.TypeA, false); len(r.Answer) != 1 {
				t.Errorf("answer %v", r)
			}
		}()
	}
	wg.Wait()
	if n := up.Count(); n != 1 {
		t.Fatalf("upstream got %d queries for 20 identical in-flight ones", n)
	}
}

func TestAutopathOption(t *testing.T) {
	up := startUpstream(t, answerA(30))
	_, addr := startNodeLocal(t, up.Addr, Config{ClusterDomain: "cluster.local", HostSearches: func() []string { return []string{"corp.example"} }})
	forged := &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("kube-system.svc.cluster.local")}
	r := ask(t, addr, "udp", "web.search.shop.cluster.local.ap.k8s.io.", dns.TypeA, true, forged)
	if opt := r.IsEdns0(); opt == nil || len(opt.Option) != 0 {
		t.Fatalf("reply must carry an OPT without the option: %v", r)
	}
	ask(t, addr, "tcp", "plain.example.", dns.TypeA, false, forged)
	want := []string{"shop.svc.cluster.local,svc.cluster.local,cluster.local,corp.example", ""}
	if got := autopathOptions(up); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("options upstream saw %q, want %q", got, want)
	}
}

func TestTruncation(t *testing.T) {
	up := startUpstream(t, answerA(30))
	_, addr := startNodeLocal(t, up.Addr, Config{})
	r := ask(t, addr, "udp", "big.example.", dns.TypeA, false)
	if !r.Truncated || len(r.Answer) >= 60 {
		t.Fatalf("512-byte client must get TC: tc=%v answers=%d", r.Truncated, len(r.Answer))
	}
	r = ask(t, addr, "tcp", "big.example.", dns.TypeA, false)
	if r.Truncated || len(r.Answer) != 60 {
		t.Fatalf("tcp: tc=%v answers=%d", r.Truncated, len(r.Answer))
	}
}

func TestBadQueries(t *testing.T) {
	up := startUpstream(t, answerA(30))
	h, _ := startNodeLocal(t, up.Addr, Config{})
	none := new(dns.Msg)
	if r := h.Answer(context.Background(), none, false); r.Rcode != dns.RcodeFormatError {
		t.Errorf("no question: %v", r.Rcode)
	}
	two := new(dns.Msg)
	two.Question = []dns.Question{{Name: "a.", Qtype: 1, Qclass: 1}, {Name: "b.", Qtype: 1, Qclass: 1}}
	if r := h.Answer(context.Background(), two, false); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %v", r.Rcode)
	}
	v1 := new(dns.Msg)
	v1.SetQuestion("a.", dns.TypeA)
	v1.SetEdns0(1232, false)
	v1.IsEdns0().SetVersion(1)
	if r := h.Answer(context.Background(), v1, false); r.Rcode != dns.RcodeBadVers {
		t.Errorf("edns version 1: %v", r.Rcode)
	}
	dead, _ := New(deadUpstream{}, Config{})
	q := new(dns.Msg)
	q.SetQuestion("a.", dns.TypeA)
	if r := dead.Answer(context.Background(), q, false); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("dead upstream: %v", r.Rcode)
	}
}

type deadUpstream struct{}

func (deadUpstream) Exchange(context.Context, *dns.Msg) (*dns.Msg, error) {
	return nil, fmt.Errorf("connection refused")
}

// TestEDNSSize checks that the stage advertises dnsmsg.EDNSSize, as the
// cluster DNS does: to its clients, whatever size they asked with, and to
// its upstream.
func TestEDNSSize(t *testing.T) {
	up := startUpstream(t, answerA(30))
	h, _ := startNodeLocal(t, up.Addr, Config{})
	for _, tc := range []struct {
		name string
		size uint16
		do   bool
	}{
		{"512", 512, false},
		{"1232", 1232, true},
		{"4096", 4096, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := new(dns.Msg)
			q.SetQuestion("edns-"+tc.name+".example.", dns.TypeA)
			q.SetEdns0(tc.size, tc.do)
			r := h.Answer(context.Background(), q, false)
			if opt := r.IsEdns0(); opt == nil || opt.UDPSize() != dnsmsg.EDNSSize || opt.Do() != tc.do {
				t.Fatalf("reply OPT %v, want size %d and DO %v", opt, dnsmsg.EDNSSize, tc.do)
			}
		})
	}
	for _, q := range up.Queries() {
		var s uint16 // 0 without EDNS0
		if o := q.Msg.IsEdns0(); o != nil {
			s = o.UDPSize()
		}
		if s != dnsmsg.EDNSSize {
			t.Errorf("upstream saw EDNS0 size %d, want %d", s, dnsmsg.EDNSSize)
		}
	}
}

// TestLoopBack: the stage's upstream is a relay (a cluster DNS whose own
// upstream is the stage) that sends each query back with its options. The
// query that comes back carries the stage's loop marker: its cache asks
// the forwarder (CheckLoop) and answers SERVFAIL at once instead of
// joining the flight of the query it is, which held it for the timeout.
func TestLoopBack(t *testing.T) {
	var stage atomic.Pointer[string]
	relay := testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(req, *stage.Load())
		if err != nil {
			r = new(dns.Msg)
			r.SetRcode(req, dns.RcodeServerFailure)
		}
		_ = w.WriteMsg(r)
	}))
	_, addr := startNodeLocal(t, relay.Addr, Config{})
	stage.Store(&addr)
	start := time.Now()
	r := ask(t, addr, "udp", "loop.example.org.", dns.TypeA, true)
	took := time.Since(start)
	t.Logf("%s after %v", dns.RcodeToString[r.Rcode], took)
	if r.Rcode != dns.RcodeServerFailure || took > 500*time.Millisecond {
		t.Errorf("%s after %v, want SERVFAIL at once (the forward timeout is 1s)", dns.RcodeToString[r.Rcode], took)
	}
}
