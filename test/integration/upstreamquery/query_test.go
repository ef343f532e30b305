// Package upstreamquery runs a real `dnsconfigurer serve` (the binary built
// by test/buildbin, on the example manifests: no API server, the answer
// cache on as shipped) in front of a stub upstream on loopback, and checks
// what of a client's query decides other clients' answers (issue 27):
//
//   - item 4: queries without RD (RD=0), to which the stub answers REFUSED
//     as a recursive resolver may, never reach clients asking with RD=1;
//
//   - item 5: a client's EDNS Client Subnet never reaches the upstream, and
//     plain clients never get the answer tailored to it.
//
//     go test -count=1 -v ./test/integration/upstreamquery/
package upstreamquery

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/test/buildbin"
)

func TestMain(m *testing.M) { os.Exit(buildbin.Main(m)) }

// Addresses the stub answers: the recursive answer, and the one tailored
// to a client subnet.
var (
	plainAddr    = net.IPv4(192, 0, 2, 1).To4()
	tailoredAddr = net.IPv4(198, 51, 100, 7).To4()
)

// startServe runs `dnsconfigurer serve` on listen forwarding to upstream
// and returns its DNS address.
func startServe(t *testing.T, listen, upstream string) string {
	t.Helper()
	return buildbin.StartServe(t, "../../../examples/objects", listen, upstream).DNS
}

// startStub is a recursive resolver on 127.0.0.4 (UDP and TCP): RD=0 gets
// REFUSED (it does not answer from its cache), RD=1 gets plainAddr at TTL
// 1, or tailoredAddr when the query carries a Client Subnet option.
func startStub(t *testing.T) *testkit.Upstream {
	t.Helper()
	return testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(req)
		r.RecursionAvailable = true
		switch {
		case !req.RecursionDesired:
			r.Rcode = dns.RcodeRefused
		case req.Question[0].Qtype == dns.TypeA:
			a := plainAddr
			if hasSubnet(req) {
				a = tailoredAddr
			}
			r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: a}}
		}
		_ = w.WriteMsg(r)
	}), testkit.At("127.0.0.4:0"))
}

// hasSubnet reports whether req carries a Client Subnet option.
func hasSubnet(req *dns.Msg) bool {
	if o := req.IsEdns0(); o != nil {
		for _, e := range o.Option {
			if e.Option() == dns.EDNS0SUBNET {
				return true
			}
		}
	}
	return false
}

// count counts the queries up got that match.
func count(up *testkit.Upstream, match func(*dns.Msg) bool) int {
	n := 0
	for _, q := range up.Queries() {
		if match(q.Msg) {
			n++
		}
	}
	return n
}

func rd0(m *dns.Msg) bool { return !m.RecursionDesired }

// ask sends name A with rd and the options opts (none: no OPT).
func ask(ctx context.Context, addr, name string, rd bool, opts ...dns.EDNS0) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.RecursionDesired = rd
	if len(opts) > 0 {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = opts
	}
	r, _, err := (&dns.Client{Timeout: 3 * time.Second}).ExchangeContext(ctx, m, addr)
	return r, err
}

// plainAnswer reports whether r is the recursive, untailored answer.
func plainAnswer(r *dns.Msg) bool {
	if r == nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return false
	}
	a, ok := r.Answer[0].(*dns.A)
	return ok && a.A.Equal(plainAddr)
}

// TestRD0DoesNotDecideRD1 (item 4): for 10 s, 150 qps of RD=0 queries and
// 50 qps of RD=1 queries for the same name (TTL 1: its answer expires every
// second, so misses keep coming) go to serve; every RD=1 client gets the
// address. Figures: run with -v.
func TestRD0DoesNotDecideRD1(t *testing.T) {
	up := startStub(t)
	srv := startServe(t, "127.0.0.5:0", up.Addr)
	const (
		name     = "rd.example.org."
		duration = 10 * time.Second
		rd0QPS   = 150
		rd1QPS   = 50
	)
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var rd1, wrong, rd0Sent, errs atomic.Int64
	var wrongMu sync.Mutex
	var wrongSeen []string
	var wg sync.WaitGroup
	pace := func(qps int, each func()) {
		defer wg.Done()
		testkit.Every(ctx, time.Second/time.Duration(qps), func() bool {
			wg.Add(1)
			go func() { defer wg.Done(); each() }()
			return true
		})
	}
	wg.Add(2)
	go pace(rd0QPS, func() {
		rd0Sent.Add(1)
		_, _ = ask(ctx, srv, name, false)
	})
	go pace(rd1QPS, func() {
		r, err := ask(context.Background(), srv, name, true)
		if err != nil {
			errs.Add(1)
			return
		}
		rd1.Add(1)
		if !plainAnswer(r) {
			wrong.Add(1)
			wrongMu.Lock()
			if len(wrongSeen) < 5 {
				wrongSeen = append(wrongSeen, dns.RcodeToString[r.Rcode]+" "+r.String())
			}
			wrongMu.Unlock()
		}
	})
	wg.Wait()
	t.Logf("%v: %d RD=0 queries sent, %d RD=1 answers, %d wrong, %d RD=1 errors; stub: %d queries, %d with RD=0",
		duration, rd0Sent.Load(), rd1.Load(), wrong.Load(), errs.Load(), up.Count(), count(up, rd0))
	if rd1.Load() < duration.Milliseconds()*rd1QPS/1000/2 {
		t.Errorf("only %d RD=1 answers: the load did not run", rd1.Load())
	}
	if wrong.Load() != 0 {
		t.Errorf("%d of %d RD=1 clients got a non-recursive answer, want 0; first: %q", wrong.Load(), rd1.Load(), wrongSeen)
	}
	if errs.Load() != 0 {
		t.Errorf("%d RD=1 queries got no reply", errs.Load())
	}
}

// TestClientSubnetNotShared (item 5): a query with a Client Subnet option,
// then plain ones for the same name while the first answer is cached: the
// stub never sees the option, and every client gets the untailored answer.
func TestClientSubnetNotShared(t *testing.T) {
	up := startStub(t)
	srv := startServe(t, "127.0.0.6:0", up.Addr)
	ecs := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(203, 0, 113, 0).To4()}
	for round := range 3 {
		// Each round a fresh name: the tailored answer (TTL 1) would be
		// the cached one.
		name := []string{"ecs-a.example.org.", "ecs-b.example.org.", "ecs-c.example.org."}[round]
		r, err := ask(context.Background(), srv, name, true, ecs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s with ECS %s: %v", name, ecs.Address, r.Answer)
		for i := range 3 {
			r, err := ask(context.Background(), srv, name, true)
			if err != nil {
				t.Fatal(err)
			}
			if !plainAnswer(r) {
				t.Errorf("%s: plain client %d got %v, want %v (not the answer tailored to %s/24)", name, i, r.Answer, plainAddr, ecs.Address)
			}
		}
	}
	if n := count(up, hasSubnet); n != 0 {
		t.Errorf("the upstream saw %d queries with the client's subnet option, want 0", n)
	}
	t.Logf("stub: %d queries, %d with ECS", up.Count(), count(up, hasSubnet))
}
