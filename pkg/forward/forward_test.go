package forward_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// runDNS serves h on 127.0.0.1:0 until the test ends and returns the address.
func runDNS(t *testing.T, h dns.Handler) string {
	t.Helper()
	srv := &dnsserver.Server{Listen: []string{"127.0.0.1:0"}, Handler: h}
	return testkit.StartServer(t, srv)
}

// smallStore holds web.ns.svc.cluster.local → 10.0.0.1.
func smallStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(store.Service{Namespace: "ns", Name: "web", Type: store.ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}})
	st.Publish()
	return st
}

// TestForwardDeadUpstream runs the dead-upstream case in small: a
// server whose two upstreams never answer, its Forwarder started (health
// checks), gets distinct outside names with an in-cluster query after every
// tenth. No step depends on how fast the machine is: the exchanges' timeout
// is the test's to strike (Config.Timeout is out of reach; each exchange runs
// under a deadline the test ends, as the Forwarder's own timeout would end
// it), and the queries go out in batches, each accounted for before the next.
// While the outside queries wait, they fill the MaxConcurrent slots (1,000)
// and every one beyond gets SERVFAIL at once (shed); every in-cluster query
// gets its answer while the slots are full; goroutines stay at most 3,000 and
// the heap at most 200 MiB. When the timeout strikes, every waiting query gets
// SERVFAIL, each after one failed exchange with one upstream. (Down upstreams
// are still asked, one at random, as CoreDNS: TestHealthRules.)
// Figures: go test -run TestForwardDeadUpstream -v ./pkg/forward/
func TestForwardDeadUpstream(t *testing.T) {
	upA := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly())
	upB := testkit.NewUpstream(t, testkit.Silent, testkit.UDPOnly())
	fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{upA.Addr, upB.Addr}, Timeout: time.Hour})
	reg := testkit.Registry(t, fwd)
	fwd.Start(context.Background())
	clock := newDeadline()
	addr := runDNS(t, clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(clock.exchanger(fwd))))

	const (
		every   = 10 // an in-cluster query after every tenth outside one
		slots   = forward.DefaultMaxConcurrent
		outside = 3 * slots
		total   = outside * (every + 1) / every
		batch   = 50 // well within a socket's receive buffer
	)
	isLocal := func(i int) bool { return i%(every+1) == every }
	c := newDNSClient(t, addr, 4, total)
	metric := func(name string) float64 {
		return testkit.Gather(t, reg).Sum("dnsconfigurer_forward_" + name)
	}

	var maxG, maxHeap uint64
	var ms runtime.MemStats
	for sent := 0; sent < total; {
		for end := min(total, sent+batch); sent < end; sent++ {
			// A domain each: MaxConcurrentPerDomain is not what this tests.
			name := fmt.Sprintf("q%d.example%d.org.", sent, sent)
			if isLocal(sent) {
				name = "web.ns.svc.cluster.local."
			}
			c.send(t, sent, name)
		}
		// Each query sent has its reply or waits in a slot.
		testkit.WaitFor(t, time.Minute, func() error {
			if got, waiting := c.replies(), int(metric("in_flight")); got+waiting < sent {
				return fmt.Errorf("%d of %d queries sent: %d answered, %d waiting for an upstream", sent, total, got, waiting)
			}
			return nil
		})
		maxG = max(maxG, uint64(runtime.NumGoroutine()))
		runtime.ReadMemStats(&ms)
		maxHeap = max(maxHeap, ms.HeapInuse)
	}

	// The slots are full and stay full until the timeout strikes.
	waiting, shed := metric("in_flight"), metric("shed_total")
	if waiting != slots || shed != outside-slots {
		t.Errorf("%v queries waiting and %v shed, want %d and %d", waiting, shed, slots, outside-slots)
	}
	if asked := metric("requests_total"); asked < slots {
		t.Errorf("%v queries sent to the upstreams, want every waiting one sent (%d; the loop probes count too)", asked, slots)
	}
	var servfails int
	for i, rcode := range c.rcodes() {
		switch {
		case isLocal(i) && rcode != dns.RcodeSuccess:
			t.Errorf("in-cluster query %d while the slots are full: %s", i, rcodeText(rcode))
		case !isLocal(i) && rcode == dns.RcodeServerFailure:
			servfails++
		case !isLocal(i) && rcode != -1:
			t.Errorf("outside query %d: %s, want SERVFAIL", i, rcodeText(rcode))
		}
	}
	if servfails != outside-slots {
		t.Errorf("%d outside queries answered while the slots are full, want the %d shed", servfails, outside-slots)
	}

	clock.strike()
	testkit.WaitEqual(t, time.Minute, "queries answered", c.replies, total)
	for i, rcode := range c.rcodes() {
		if !isLocal(i) && rcode != dns.RcodeServerFailure {
			t.Errorf("outside query %d: %s, want SERVFAIL", i, rcodeText(rcode))
		}
	}
	if failed, answered := metric("upstream_errors_total"), metric("responses_total"); failed != slots || answered != 0 {
		t.Errorf("%v failed exchanges and %v replies from upstreams, want %d and 0", failed, answered, slots)
	}
	t.Logf("%d queries: %v shed, %v timed out; upstream reads %d + %d; max goroutines %d, max heap in use %.1f MiB",
		total, shed, metric("upstream_errors_total"), upA.Count(), upB.Count(), maxG, float64(maxHeap)/(1<<20))
	if maxG > 3000 {
		t.Errorf("%d goroutines, want <= 3000", maxG)
	}
	if maxHeap > 200<<20 {
		t.Errorf("heap in use %d MiB, want <= 200", maxHeap>>20)
	}
}

func rcodeText(rcode int) string {
	if rcode == -1 {
		return "no reply"
	}
	return dns.RcodeToString[rcode]
}

// deadline is the test's clock for the exchanges' timeout: each exchange of
// its exchanger runs under a context that ends, with
// context.DeadlineExceeded as when Config.Timeout passes, once strike is
// called.
type deadline struct {
	passed context.Context
	strike context.CancelFunc
}

func newDeadline() *deadline {
	ctx, cancel := context.WithCancel(context.Background())
	return &deadline{passed: ctx, strike: cancel}
}

// exchanger is fwd with each exchange under d.
func (d *deadline) exchanger(fwd *forward.Forwarder) clusterdns.Exchanger {
	return exchangeFunc(func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		return fwd.Exchange(deadlineCtx{Context: ctx, passed: d.passed}, m)
	})
}

type exchangeFunc func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)

func (f exchangeFunc) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) { return f(ctx, m) }

// deadlineCtx is a request's context whose deadline passes when passed is
// done. (The server's request contexts never end of their own.)
type deadlineCtx struct {
	context.Context
	passed context.Context
}

func (c deadlineCtx) Done() <-chan struct{} { return c.passed.Done() }

func (c deadlineCtx) Err() error {
	if c.passed.Err() != nil {
		return context.DeadlineExceeded
	}
	return nil
}

// AfterFunc lets the contexts made from c follow it without a goroutine
// each (context.WithTimeout looks for this method).
func (c deadlineCtx) AfterFunc(f func()) func() bool { return context.AfterFunc(c.passed, f) }

// dnsClient sends queries over UDP sockets, the query ID being the index,
// and keeps the first reply's rcode of each.
type dnsClient struct {
	conns   []net.Conn
	mu      sync.Mutex
	rcode   []int // -1: no reply yet
	replied int
}

func newDNSClient(t *testing.T, addr string, sockets, total int) *dnsClient {
	c := &dnsClient{rcode: make([]int, total)}
	for i := range c.rcode {
		c.rcode[i] = -1
	}
	var readers sync.WaitGroup
	for range sockets {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.conns = append(c.conns, conn)
		readers.Go(func() {
			buf := make([]byte, 2048)
			for {
				n, err := conn.Read(buf)
				if err != nil {
					return
				}
				r := new(dns.Msg)
				if r.Unpack(buf[:n]) != nil || int(r.Id) >= total {
					continue
				}
				c.mu.Lock()
				if c.rcode[r.Id] == -1 {
					c.rcode[r.Id] = r.Rcode
					c.replied++
				}
				c.mu.Unlock()
			}
		})
	}
	t.Cleanup(func() {
		for _, conn := range c.conns {
			conn.Close()
		}
		readers.Wait()
	})
	return c
}

// send sends query i, for name A, on one of the sockets.
func (c *dnsClient) send(t *testing.T, i int, name string) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = uint16(i)
	b, _ := m.Pack()
	if _, err := c.conns[i%len(c.conns)].Write(b); err != nil {
		t.Fatal(err)
	}
}

func (c *dnsClient) replies() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replied
}

func (c *dnsClient) rcodes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rcode)
}

// counting wraps a handler and counts the queries it gets.
func counting(h dns.Handler, n *atomic.Int64) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n.Add(1)
		h.ServeDNS(w, r)
	})
}

// lateUpstreams is an UpstreamSource set once both servers are up.
type lateUpstreams struct{ addr atomic.Pointer[string] }

func (l *lateUpstreams) Upstreams() []string {
	if a := l.addr.Load(); a != nil {
		return []string{*a}
	}
	return nil
}

// TestForwardLoop points two servers at each other: one query for an
// outside name must end with SERVFAIL after a few queries, found by the loop
// marker. Figures: go test -run TestForwardLoop -v ./pkg/forward/
func TestForwardLoop(t *testing.T) {
	var toA, toB lateUpstreams
	fwdA, _ := forward.New(forward.Config{Upstreams: &toA, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	fwdB, _ := forward.New(forward.Config{Upstreams: &toB, Timeout: time.Second, Policy: forward.PolicyRoundRobin})
	var nA, nB atomic.Int64
	a := runDNS(t, counting(clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdA)), &nA))
	b := runDNS(t, counting(clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdB)), &nB))
	toA.addr.Store(&b)
	toB.addr.Store(&a)
	reg := testkit.Registry(t, fwdA)

	start := time.Now()
	r := testkit.Ask(t, "udp", a, new(dns.Msg).SetQuestion("loop.example.org.", dns.TypeA))
	took := time.Since(start)
	t.Logf("rcode %s after %v; queries seen: A %d, B %d", dns.RcodeToString[r.Rcode], took.Round(time.Millisecond), nA.Load(), nB.Load())
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if n := nA.Load() + nB.Load(); n > 3 {
		t.Errorf("%d queries in the loop, want <= 3", n)
	}
	if took > 500*time.Millisecond {
		t.Errorf("loop answered after %v, want at once", took)
	}
	if v := testkit.Gather(t, reg)[`dnsconfigurer_forward_loops_total{zone="."}`]; v != 1 {
		t.Errorf("forward_loops_total = %v, want 1", v)
	}
}

// TestForwardLoopThroughStrippingResolver closes the loop through a relay
// that drops EDNS0 options and makes a fresh query for each it gets (as a
// recursive resolver would): the marker is lost, and coalescing holds the
// query that comes back instead, so the loop ends with SERVFAIL after the
// timeout with three queries seen.
func TestForwardLoopThroughStrippingResolver(t *testing.T) {
	var toRelay lateUpstreams
	fwd, _ := forward.New(forward.Config{Upstreams: &toRelay, Timeout: 500 * time.Millisecond, Policy: forward.PolicyRoundRobin})
	var nA atomic.Int64
	a := runDNS(t, counting(clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwd)), &nA))
	relay := testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := new(dns.Msg)
		q.SetQuestion(req.Question[0].Name, req.Question[0].Qtype)
		r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(q, a)
		if err != nil {
			r = new(dns.Msg)
			r.SetRcode(req, dns.RcodeServerFailure)
		}
		r.Id = req.Id
		_ = w.WriteMsg(r)
	}))
	toRelay.addr.Store(&relay.Addr)

	r := testkit.Ask(t, "udp", a, new(dns.Msg).SetQuestion("loop.example.org.", dns.TypeA))
	t.Logf("rcode %s; queries seen: server %d, relay %d", dns.RcodeToString[r.Rcode], nA.Load(), relay.Count())
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if n := int(nA.Load()) + relay.Count(); n > 3 {
		t.Errorf("%d queries in the loop, want <= 3", n)
	}
}

// heldUpstream answers every query with 192.0.2.1 once release is called
// (at the latest when the test ends).
func heldUpstream(t *testing.T) (up *testkit.Upstream, release func()) {
	t.Helper()
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	up = testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		<-held
		_ = w.WriteMsg(answer(req))
	}))
	// After the upstream is made, so it runs before its shutdown (which
	// waits for the held handlers).
	t.Cleanup(release)
	return up, release
}

func TestForwardCoalesces(t *testing.T) {
	up, unblock := heldUpstream(t)
	fwd, _ := forward.New(forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}, Timeout: 2 * time.Second, Policy: forward.PolicyRoundRobin, MaxConcurrent: 10})
	reg := testkit.Registry(t, fwd)
	metric := func(name string) float64 { return testkit.Gather(t, reg)["dnsconfigurer_forward_"+name+`{zone="."}`] }

	type result struct {
		id  uint16
		r   *dns.Msg
		err error
	}
	results := make(chan result, 10)
	for i := range 10 {
		m := new(dns.Msg)
		m.SetQuestion("Same.Example.org.", dns.TypeA)
		if i%2 == 1 {
			m.Question[0].Name = "same.example.ORG."
		}
		m.Id = uint16(100 + i)
		go func() {
			r, err := fwd.Exchange(context.Background(), m)
			results <- result{m.Id, r, err}
		}()
	}
	// Ten seconds: the race detector on a loaded machine is slow.
	testkit.WaitFor(t, 10*time.Second, func() error {
		if f, c := metric("in_flight"), metric("coalesced_total"); f != 1 || c != 9 {
			return fmt.Errorf("%v queries in flight, %v coalesced; want 1, and 9 waiting for it", f, c)
		}
		return nil
	})
	unblock()
	for range 10 {
		res := <-results
		if res.err != nil || res.r.Id != res.id || len(res.r.Answer) != 1 {
			t.Errorf("query %d: %v %v", res.id, res.r, res.err)
		}
	}
	if n := up.Count(); n != 1 {
		t.Errorf("upstream got %d queries, want 1", n)
	}
	if c, r := metric("coalesced_total"), metric("shed_total"); c != 9 || r != 0 {
		t.Errorf("coalesced %v shed %v, want 9 and 0", c, r)
	}
	if v := metric("in_flight"); v != 0 {
		t.Errorf("in flight after: %v", v)
	}
}

// TestForwardAdvertisesEDNSSize checks that a client's EDNS0 claim is not
// passed upstream (the read buffer is sized by it), that a reply too big
// for it over UDP is asked again over TCP, that a TCP client's query goes
// over TCP at once, and that the upstream gets the loop marker.
func TestForwardAdvertisesEDNSSize(t *testing.T) {
	// A misbehaving upstream: 200 answers (3.2 KB) over UDP too, whatever
	// size was advertised.
	big := testkit.Reply(func(q dns.Question, r *dns.Msg) {
		for i := range 200 {
			r.Answer = append(r.Answer, testkit.A(q.Name, 30, fmt.Sprintf("192.0.2.%d", i)))
		}
	})
	for _, tc := range []struct {
		name   string
		origin dnsmsg.Origin
		want   []string
	}{
		{"udp client", dnsmsg.Origin{}, []string{"udp", "tcp"}},
		{"tcp client", dnsmsg.Origin{TCP: true}, []string{"tcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := testkit.NewUpstream(t, big)
			fwd := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{up.Addr}})
			m := new(dns.Msg)
			m.SetQuestion("big.example.org.", dns.TypeA)
			m.SetEdns0(65535, false)
			r, err := fwd.Forward(context.Background(), m, tc.origin)
			if err != nil || len(r.Answer) != 200 || r.Id != m.Id {
				t.Fatalf("%v %v, want 200 answers", r, err)
			}
			var protos []string
			for _, q := range up.Queries() {
				protos = append(protos, q.Net)
				var size uint16
				marked := false
				if o := q.Msg.IsEdns0(); o != nil {
					size = o.UDPSize()
					for _, e := range o.Option {
						marked = marked || e.Option() == forward.DefaultLoopOptionCode
					}
				}
				if size != 1232 || !marked {
					t.Errorf("upstream saw a query over %s with EDNS0 size %d, loop marker %v; want 1232 and the marker", q.Net, size, marked)
				}
			}
			if !slices.Equal(protos, tc.want) {
				t.Errorf("upstream saw %v, want %v", protos, tc.want)
			}
		})
	}
}

// TestLoopProbe points two servers at each other, each Forwarder started:
// each one's loop probe comes back to it with its marker, which it logs at
// error level naming the upstream and counts, without taking the upstream
// out of use (the marker stops every looping query at once, and the other
// server then sees its own loop too). A query then fails at once after one
// lap. A third Forwarder to a plain upstream finds nothing.
func TestLoopProbe(t *testing.T) {
	var toA, toB lateUpstreams
	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	fwdA := newForwarder(t, forward.Config{Upstreams: &toA, Logger: logger, HealthCheck: 10 * time.Millisecond})
	fwdB := newForwarder(t, forward.Config{Upstreams: &toB, Logger: logger, HealthCheck: 10 * time.Millisecond})
	var nA, nB atomic.Int64
	a := runDNS(t, counting(clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdA)), &nA))
	b := runDNS(t, counting(clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdB)), &nB))
	toA.addr.Store(&b)
	toB.addr.Store(&a)
	regA, regB := testkit.Registry(t, fwdA), testkit.Registry(t, fwdB)
	start := time.Now()
	fwdA.Start(context.Background())
	fwdB.Start(context.Background())
	testkit.WaitFor(t, 3*time.Second, func() error {
		const loops = `dnsconfigurer_forward_loop_detected_total{zone="."}`
		if a, b := testkit.Gather(t, regA)[loops], testkit.Gather(t, regB)[loops]; a != 1 || b != 1 {
			return fmt.Errorf("loops detected: A %v, B %v; want both 1", a, b)
		}
		return nil
	})
	t.Logf("loop found after %v; queries seen: A %d, B %d", time.Since(start).Round(time.Millisecond), nA.Load(), nB.Load())
	for _, reg := range []*prometheus.Registry{regA, regB} {
		if v := testkit.Gather(t, reg)[`dnsconfigurer_forward_looping_upstreams{zone="."}`]; v != 0 {
			t.Errorf("looping_upstreams %v, want 0 (the marker stops the loop)", v)
		}
	}
	before := nA.Load() + nB.Load()
	m := new(dns.Msg).SetQuestion("loop.example.org.", dns.TypeA)
	qstart := time.Now()
	if r := testkit.Ask(t, "udp", a, m); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("query after the probe: %v, want SERVFAIL", r)
	}
	if took := time.Since(qstart); took > 500*time.Millisecond {
		t.Errorf("SERVFAIL after %v, want at once", took)
	}
	if n := nA.Load() + nB.Load() - before; n > 3 {
		t.Errorf("%d queries seen for one, want <= 3 (one lap)", n)
	}
	// The loop is counted before it is logged.
	testkit.WaitFor(t, 5*time.Second, func() error {
		logMu.Lock()
		defer logMu.Unlock()
		for _, up := range []string{a, b} {
			if !strings.Contains(logs.String(), `level=ERROR msg="forwarding loop: a query sent to this upstream came back to this server; answering SERVFAIL" zone=. upstream=`+up) {
				return fmt.Errorf("no error naming upstream %s:\n%s", up, logs.String())
			}
		}
		return nil
	})

	plain := testkit.NewUpstream(t, testkit.Reply(func(_ dns.Question, r *dns.Msg) { r.Rcode = dns.RcodeNameError }))
	fwdC := newForwarder(t, forward.Config{Upstreams: forward.StaticUpstreams{plain.Addr}, HealthCheck: 10 * time.Millisecond})
	regC := testkit.Registry(t, fwdC)
	fwdC.Start(context.Background())
	if _, err := fwdC.Exchange(context.Background(), m); err != nil {
		t.Errorf("plain upstream: %v", err)
	}
	for _, name := range []string{"looping_upstreams", "loop_detected_total", "loops_total"} {
		if v := testkit.Gather(t, regC)[`dnsconfigurer_forward_`+name+`{zone="."}`]; v != 0 {
			t.Errorf("plain upstream: %s %v, want 0", name, v)
		}
	}
}

// TestLoopProbeLatePeer starts a Forwarder whose upstream, a server
// forwarding back to it, does not answer yet: its first loop probe gets no
// reply. Once the peer answers, a later probe comes back and the loop is
// found with no client query.
func TestLoopProbeLatePeer(t *testing.T) {
	var toA, toB lateUpstreams
	fwdA := newForwarder(t, forward.Config{Upstreams: &toA, HealthCheck: 10 * time.Millisecond, Timeout: 200 * time.Millisecond})
	fwdB := newForwarder(t, forward.Config{Upstreams: &toB})
	a := runDNS(t, clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdA)))
	var up atomic.Bool
	var dropped atomic.Int64
	inner := clusterdns.NewHandler("cluster.local", smallStore(t), clusterdns.WithForwarder(fwdB))
	b := runDNS(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if !up.Load() {
			dropped.Add(1) // not up yet: no reply
			return
		}
		inner.ServeDNS(w, req)
	}))
	toA.addr.Store(&b)
	toB.addr.Store(&a)
	reg := testkit.Registry(t, fwdA)
	fwdA.Start(context.Background())
	testkit.WaitFor(t, 3*time.Second, func() error {
		if dropped.Load() == 0 {
			return errors.New("no loop probe yet")
		}
		return nil
	})
	up.Store(true)
	start := time.Now()
	testkit.WaitFor(t, 5*time.Second, func() error {
		if n := testkit.Gather(t, reg)[`dnsconfigurer_forward_loop_detected_total{zone="."}`]; n != 1 {
			return fmt.Errorf("%v loops detected, want 1 found by a later probe", n)
		}
		return nil
	})
	t.Logf("loop found %v after the peer came up; probes dropped before: %d", time.Since(start).Round(time.Millisecond), dropped.Load())
}

// TestProbesAtRest: a Forwarder at rest (its upstream answered its loop
// probe, none down) sleeps until a pooled connection may expire, not a
// health check interval; a new upstream list and a failed query still wake
// it at once. Health checks and expiry here are an hour apart, so only
// those wakes can make the probes the test waits for.
func TestProbesAtRest(t *testing.T) {
	probes := func(up *testkit.Upstream, qtype uint16) int {
		n := 0
		for _, q := range up.Queries() {
			if q.Msg.Question[0].Qtype == qtype {
				n++
			}
		}
		return n
	}
	first := testkit.NewUpstream(t, answering, testkit.UDPOnly())
	var list lateUpstreams
	list.addr.Store(&first.Addr)
	fwd := newForwarder(t, forward.Config{Upstreams: &list, HealthCheck: time.Hour, Expire: time.Hour, Timeout: 200 * time.Millisecond})
	fwd.Start(context.Background())
	testkit.WaitFor(t, 3*time.Second, func() error {
		if probes(first, dns.TypeHINFO) != 1 {
			return errors.New("no loop probe of the first list yet")
		}
		return nil
	})

	// A new list: the query that reads it wakes the background work, which
	// probes the new upstream for loops.
	second := testkit.NewUpstream(t, dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		if req.Question[0].Qtype == dns.TypeA && strings.HasPrefix(req.Question[0].Name, "drop.") {
			return // a name whose servers drop queries: the query times out
		}
		_ = w.WriteMsg(answer(req))
	}), testkit.UDPOnly())
	list.addr.Store(&second.Addr)
	m := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	if _, err := fwd.Exchange(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 3*time.Second, func() error {
		if probes(second, dns.TypeHINFO) != 1 {
			return errors.New("no loop probe of the new list")
		}
		return nil
	})

	// A failed query: a health probe (NS of the root) follows at once.
	m = new(dns.Msg).SetQuestion("drop.example.org.", dns.TypeA)
	if _, err := fwd.Exchange(context.Background(), m); err == nil {
		t.Fatal("the dropped query was answered")
	}
	testkit.WaitFor(t, 3*time.Second, func() error {
		if probes(second, dns.TypeNS) == 0 {
			return errors.New("no health probe after the failed query")
		}
		return nil
	})
	if n := probes(first, dns.TypeHINFO) + probes(first, dns.TypeNS); n != 1 {
		t.Errorf("the first upstream got %d probes, want its one loop probe", n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestSelfReason is the rule of which upstream is the server itself: the
// same address, or any loopback address under a listen on every address.
// A loopback neighbour (systemd-resolved's 127.0.0.53 beside a server on
// 127.0.0.1) is another socket and stays usable.
func TestSelfReason(t *testing.T) {
	for _, tc := range []struct {
		desc, up string
		listen   []string
		want     string
	}{
		{"same address", "127.0.0.1:53", []string{"127.0.0.1:53"}, "it is the listen address 127.0.0.1:53"},
		{"loopback neighbour", "127.0.0.53:53", []string{"127.0.0.1:53"}, ""},
		{"other port", "127.0.0.1:5353", []string{"127.0.0.1:53"}, ""},
		{"every address, loopback upstream", "127.0.0.53:53", []string{":53"}, "the listen address 0.0.0.0:53 takes port 53 of every address"},
		{"every address, other host", "10.0.0.53:53", []string{"0.0.0.0:53"}, ""},
		{"second listen address", "10.96.0.10:53", []string{"127.0.0.1:53", "10.96.0.10:53"}, "it is the listen address 10.96.0.10:53"},
		{"IPv6 same address", "[::1]:53", []string{"[::1]:53"}, "it is the listen address [::1]:53"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			up, err := forward.ParseAddrPort(tc.up)
			if err != nil {
				t.Fatal(err)
			}
			got := forward.SelfReason(up, tc.listen)
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("SelfReason(%s, %q) = %q, want %q", tc.up, tc.listen, got, tc.want)
			}
		})
	}
}
