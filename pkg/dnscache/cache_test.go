package dnscache

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func ttls(r *dns.Msg) []uint32 {
	var out []uint32
	for _, sec := range [][]dns.RR{r.Answer, r.Ns, r.Extra} {
		for _, rr := range sec {
			out = append(out, rr.Header().Ttl)
		}
	}
	return out
}

// TestTTLRules: what is cached and for how long, and the TTLs served.
func TestTTLRules(t *testing.T) {
	withAnswer := func(rrs ...dns.RR) func(*dns.Msg) { return func(r *dns.Msg) { r.Answer = rrs } }
	for _, tc := range []struct {
		name   string
		cfg    Config
		reply  func(r *dns.Msg)
		kind   Kind          // Uncached: not cached
		life   time.Duration // how long it stays cached
		served []uint32      // TTLs of the first reply
	}{
		{"positive: smallest TTL", Config{}, withAnswer(rrA("a.example.", 300), rrA("a.example.", 120)), Success, 120 * time.Second, []uint32{120, 120}},
		{"positive: capped at MaxTTL", Config{MaxTTL: 30 * time.Second}, withAnswer(rrA("a.example.", 300)), Success, 30 * time.Second, []uint32{30}},
		{"positive: raised to MinTTL", Config{MinTTL: 5 * time.Second}, withAnswer(rrA("a.example.", 2)), Success, 5 * time.Second, []uint32{5}},
		{"positive: authority TTL counts", Config{}, func(r *dns.Msg) {
			r.Answer = []dns.RR{rrA("a.example.", 300)}
			r.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.example."}}
		}, Success, 60 * time.Second, []uint32{60, 60}},
		{"positive: TTL 0 not cached", Config{}, withAnswer(rrA("a.example.", 0)), Uncached, 0, []uint32{0}},
		{"NXDOMAIN: SOA MINIMUM", Config{}, func(r *dns.Msg) {
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{soa("example.", 3600, 60)}
		}, Denial, 60 * time.Second, []uint32{60}},
		{"NODATA: SOA TTL under MINIMUM", Config{}, func(r *dns.Msg) { r.Ns = []dns.RR{soa("example.", 20, 600)} }, Denial, 20 * time.Second, []uint32{20}},
		{"NXDOMAIN: capped at MaxNegativeTTL", Config{MaxNegativeTTL: 5 * time.Second}, func(r *dns.Msg) {
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{soa("example.", 3600, 600)}
		}, Denial, 5 * time.Second, []uint32{5}},
		{"NXDOMAIN: raised to MinNegativeTTL", Config{MinNegativeTTL: 10 * time.Second}, func(r *dns.Msg) {
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{soa("example.", 3600, 1)}
		}, Denial, 10 * time.Second, []uint32{10}},
		{"NXDOMAIN without SOA", Config{}, func(r *dns.Msg) { r.Rcode = dns.RcodeNameError }, Uncached, 0, nil},
		{"referral", Config{}, func(r *dns.Msg) {
			r.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.example."}}
		}, Uncached, 0, []uint32{60}},
		{"SERVFAIL", Config{}, func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure }, Uncached, 0, nil},
		{"REFUSED", Config{}, func(r *dns.Msg) { r.Rcode = dns.RcodeRefused }, Uncached, 0, nil},
		{"NOTIMP", Config{}, func(r *dns.Msg) { r.Rcode = dns.RcodeNotImplemented }, Uncached, 0, nil},
		{"truncated", Config{}, func(r *dns.Msg) { r.Truncated = true; r.Answer = []dns.RR{rrA("a.example.", 300)} }, Uncached, 0, []uint32{300}},
		{"other question", Config{}, func(r *dns.Msg) {
			r.Question[0].Name = "b.example."
			r.Answer = []dns.RR{rrA("b.example.", 300)}
		}, Uncached, 0, []uint32{300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
				r := new(dns.Msg)
				r.SetReply(q)
				tc.reply(r)
				return r, nil
			}}
			c, clk := newCache(t, next, tc.cfg)
			q := query("a.example.", dns.TypeA)
			q.Id = 4242
			r, err := c.Exchange(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if r.Id != 4242 {
				t.Errorf("reply ID %d, want the query's", r.Id)
			}
			if got := ttls(r); !slices.Equal(got, tc.served) {
				t.Errorf("first reply TTLs %v, want %v", got, tc.served)
			}
			if tc.kind == Uncached {
				if n := c.Len(Success) + c.Len(Denial); n != 0 {
					t.Fatalf("cached %d answers, want none", n)
				}
				c.Exchange(context.Background(), q)
				if n := next.calls.Load(); n != 2 {
					t.Fatalf("next asked %d times, want 2", n)
				}
				return
			}
			if c.Len(tc.kind) != 1 {
				t.Fatalf("no %v answer cached", tc.kind)
			}
			clk.Advance(tc.life - time.Second)
			r, src, _ := c.Answer(context.Background(), q)
			if src != Hit || next.calls.Load() != 1 {
				t.Fatalf("1 s before expiry: %v, next asked %d times", src, next.calls.Load())
			}
			for _, ttl := range ttls(r) {
				if ttl != 1 {
					t.Errorf("1 s before expiry TTLs %v, want 1", ttls(r))
				}
			}
			clk.Advance(time.Second)
			if _, src, _ := c.Answer(context.Background(), q); src != Miss || next.calls.Load() != 2 {
				t.Fatalf("at expiry: %v, next asked %d times", src, next.calls.Load())
			}
		})
	}
}

// TestAging: TTLs age by whole seconds; the reply echoes the asker's case.
func TestAging(t *testing.T) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 100)}
		r.SetEdns0(4096, false)
		r.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}
		return r, nil
	}}
	c, clk := newCache(t, next, Config{})
	q0 := query("web.example.", dns.TypeA)
	q0.RecursionDesired = false // cached apart from RD=1 (TestRecursionDesired)
	c.Exchange(context.Background(), q0)
	for _, tc := range []struct {
		advance time.Duration
		ttl     uint32
	}{{0, 100}, {999 * time.Millisecond, 100}, {time.Millisecond, 99}, {29 * time.Second, 70}, {69 * time.Second, 1}} {
		clk.Advance(tc.advance)
		q := query("WEB.Example.", dns.TypeA)
		q.RecursionDesired = false
		r, src, err := c.Answer(context.Background(), q)
		if err != nil || src != Hit {
			t.Fatalf("%v, %v", src, err)
		}
		if r.Answer[0].Header().Ttl != tc.ttl || r.Answer[0].Header().Name != "WEB.Example." || r.Question[0].Name != "WEB.Example." ||
			r.RecursionDesired || r.IsEdns0() != nil {
			t.Fatalf("after %v: %v", tc.advance, r)
		}
	}
}

// TestCapUnderOneSecond: MaxTTL and MaxNegativeTTL under 1 s turn caching
// off: every question is asked again.
func TestCapUnderOneSecond(t *testing.T) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 100)}
		return r, nil
	}}
	c, _ := newCache(t, next, Config{MaxTTL: time.Nanosecond, MaxNegativeTTL: time.Nanosecond})
	for range 3 {
		if _, src, err := c.Answer(context.Background(), query("web.example.", dns.TypeA)); err != nil || src != Miss {
			t.Fatalf("%v, %v; want a miss every time", src, err)
		}
	}
	if n := next.calls.Load(); n != 3 {
		t.Fatalf("next asked %d times, want 3", n)
	}
}

// TestKey: the key is the lowercase name, type, class, DO and CD, never
// EDNS0 options.
func TestKey(t *testing.T) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 100)}
		return r, nil
	}}
	c, _ := newCache(t, next, Config{})
	for _, tc := range []struct {
		name  string
		q     func() *dns.Msg
		calls int32
	}{
		{"first", func() *dns.Msg { return query("a.example.", dns.TypeA) }, 1},
		{"case", func() *dns.Msg { return query("A.EXAMPLE.", dns.TypeA) }, 1},
		{"edns without DO", func() *dns.Msg { q := query("a.example.", dns.TypeA); q.SetEdns0(1232, false); return q }, 1},
		{"loop marker option", func() *dns.Msg {
			q := query("a.example.", dns.TypeA)
			q.SetEdns0(1232, false)
			q.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65534, Data: []byte{1, 2, 3}}}
			return q
		}, 1},
		{"DO", func() *dns.Msg { q := query("a.example.", dns.TypeA); q.SetEdns0(1232, true); return q }, 2},
		{"CD", func() *dns.Msg { q := query("a.example.", dns.TypeA); q.CheckingDisabled = true; return q }, 3},
		{"type", func() *dns.Msg { return query("a.example.", dns.TypeAAAA) }, 4},
		{"class", func() *dns.Msg { q := query("a.example.", dns.TypeA); q.Question[0].Qclass = dns.ClassCHAOS; return q }, 5},
		{"RD=0", func() *dns.Msg { q := query("a.example.", dns.TypeA); q.RecursionDesired = false; return q }, 6},
		{"RD=0 again", func() *dns.Msg { q := query("A.example.", dns.TypeA); q.RecursionDesired = false; return q }, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Exchange(context.Background(), tc.q()); err != nil {
				t.Fatal(err)
			}
			if n := next.calls.Load(); n != tc.calls {
				t.Fatalf("next asked %d times, want %d", n, tc.calls)
			}
		})
	}
	if _, err := c.Exchange(context.Background(), new(dns.Msg)); err == nil || !strings.Contains(err.Error(), "0 questions") {
		t.Errorf("query without question: %v", err)
	}
}

// TestRecursionDesired (issue 27 item 4): a query without RD neither leads
// the flight that clients asking for recursion join nor fills the entry
// they are answered from. The next step answers as a recursive upstream
// does: RD=0 with REFUSED or an empty NOERROR (a referral-less denial with
// an SOA, cacheable), RD=1 with the address.
func TestRecursionDesired(t *testing.T) {
	for _, norec := range []struct {
		name  string
		reply func(r *dns.Msg)
	}{
		{"REFUSED", func(r *dns.Msg) { r.Rcode = dns.RcodeRefused }},
		{"empty NOERROR", func(r *dns.Msg) { r.Ns = []dns.RR{soa("example.", 60, 60)} }},
	} {
		t.Run(norec.name, func(t *testing.T) {
			release := make(chan struct{})
			var rd0 atomic.Int32
			next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
				r := new(dns.Msg)
				r.SetReply(q)
				if !q.RecursionDesired {
					rd0.Add(1)
					<-release
					norec.reply(r)
					return r, nil
				}
				r.Answer = []dns.RR{rrA(q.Question[0].Name, 30)}
				return r, nil
			}}
			c, _ := newCache(t, next, Config{})
			q0 := query("rd.example.", dns.TypeA)
			q0.RecursionDesired = false
			lead := make(chan *dns.Msg, 1)
			go func() {
				r, err := c.Exchange(context.Background(), q0)
				if err != nil {
					t.Error(err)
				}
				lead <- r
			}()
			// The RD=0 query is in flight, held by next.
			testkit.WaitEqual(t, 5*time.Second, "RD=0 queries at next", rd0.Load, 1)
			type answer struct {
				r   *dns.Msg
				src Source
				err error
			}
			rd1 := make(chan answer, 1)
			go func() {
				r, src, err := c.Answer(context.Background(), query("rd.example.", dns.TypeA))
				rd1 <- answer{r, src, err}
			}()
			// It answers on its own, or joins the RD=0 flight (the bug):
			// the flight is then released to see what it gets.
			testkit.WaitFor(t, 5*time.Second, func() error {
				if len(rd1) == 0 && c.coalesced.Load() == 0 {
					return errors.New("the RD=1 query neither answered nor coalesced")
				}
				return nil
			})
			close(release)
			a := <-rd1
			if a.err != nil || a.r.Rcode != dns.RcodeSuccess || len(a.r.Answer) != 1 || !a.r.RecursionDesired || a.src != Miss {
				t.Fatalf("RD=1 beside an RD=0 flight: %v %v %v, want its own miss with the address", a.src, a.r, a.err)
			}
			if r := <-lead; r == nil || r.RecursionDesired || len(r.Answer) != 0 {
				t.Fatalf("RD=0 leader: %v, want the non-recursive reply", r)
			}
			// Both cached (or not) apart: each asker gets its own.
			q0 = q0.Copy()
			q0.Id = dns.Id()
			if r, err := c.Exchange(context.Background(), q0); err != nil || len(r.Answer) != 0 {
				t.Fatalf("RD=0 again: %v %v", r, err)
			}
			r, src, err := c.Answer(context.Background(), query("rd.example.", dns.TypeA))
			if err != nil || len(r.Answer) != 1 || src != Hit {
				t.Fatalf("RD=1 again: %v %v %v, want a hit with the address", src, r, err)
			}
		})
	}
}

// TestSeparateCapacities: denials never evict successes, and each kind
// stays within its bytes.
func TestSeparateCapacities(t *testing.T) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		if strings.HasPrefix(q.Question[0].Name, "nx") {
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{soa("example.", 60, 60)}
		} else {
			r.Answer = []dns.RR{rrA(q.Question[0].Name, 300)}
		}
		return r, nil
	}}
	const successBytes, denialBytes = 64 << 10, 16 << 10
	c, _ := newCache(t, next, Config{SuccessBytes: successBytes, DenialBytes: denialBytes})
	for i := range 50 {
		c.Exchange(context.Background(), query("ok"+itoa(i)+".example.", dns.TypeA))
	}
	successes := c.Len(Success)
	for i := range 5000 {
		c.Exchange(context.Background(), query("nx"+itoa(i)+".example.", dns.TypeA))
		if b := c.Bytes(Denial); b > denialBytes {
			t.Fatalf("denials account %d bytes, over %d", b, denialBytes)
		}
	}
	if c.Len(Success) != successes || successes != 50 {
		t.Fatalf("successes %d after the denials, want 50", c.Len(Success))
	}
	calls := next.calls.Load()
	for i := range 50 {
		c.Exchange(context.Background(), query("ok"+itoa(i)+".example.", dns.TypeA))
	}
	if next.calls.Load() != calls {
		t.Errorf("successes asked again after the denials")
	}
	if n := c.Len(Denial); n == 0 || n >= 5000 {
		t.Errorf("%d denials cached of 5000", n)
	}
	for i := range 5000 {
		c.Exchange(context.Background(), query("ok-more"+itoa(i)+".example.", dns.TypeA))
		if b := c.Bytes(Success); b > successBytes {
			t.Fatalf("successes account %d bytes, over %d", b, successBytes)
		}
	}
	// MaxEntries bounds each kind.
	small, _ := newCache(t, next, Config{MaxEntries: 3})
	for i := range 10 {
		small.Exchange(context.Background(), query("ok"+itoa(i)+".example.", dns.TypeA))
		small.Exchange(context.Background(), query("nx"+itoa(i)+".example.", dns.TypeA))
	}
	if small.Len(Success) != 3 || small.Len(Denial) != 3 {
		t.Errorf("MaxEntries 3: %d successes, %d denials", small.Len(Success), small.Len(Denial))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestServeStale: when the upstream fails, an expired answer is served
// with TTL 30 within the ServeStale window, and the failure beyond it.
func TestServeStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func(s *testkit.Upstream, set func(answer)) // makes the upstream fail
		stale bool
		rcode int // when not stale
	}{
		{"upstream dies", func(s *testkit.Upstream, _ func(answer)) { s.Stop() }, true, 0},
		{"SERVFAIL", func(_ *testkit.Upstream, set func(answer)) {
			set(func(q dns.Question, r *dns.Msg) { r.Rcode = dns.RcodeServerFailure })
		}, true, 0},
		{"REFUSED", func(_ *testkit.Upstream, set func(answer)) {
			set(func(q dns.Question, r *dns.Msg) { r.Rcode = dns.RcodeRefused })
		}, true, 0},
		{"NXDOMAIN is an answer", func(_ *testkit.Upstream, set func(answer)) {
			set(func(q dns.Question, r *dns.Msg) {
				r.Rcode = dns.RcodeNameError
				r.Ns = []dns.RR{soa("example.", 60, 60)}
			})
		}, false, dns.RcodeNameError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var current atomic.Pointer[answer]
			set := func(f answer) { current.Store(&f) }
			set(func(q dns.Question, r *dns.Msg) { r.Answer = []dns.RR{rrA(q.Name, 60)} })
			s := startStub(t, func(q dns.Question, r *dns.Msg) { (*current.Load())(q, r) })
			c, clk := newCache(t, udpNext{s.Addr}, Config{ServeStale: time.Hour})
			ctx := context.Background()
			if r, err := c.Exchange(ctx, query("web.example.", dns.TypeA)); err != nil || len(r.Answer) != 1 {
				t.Fatalf("first: %v %v", r, err)
			}
			tc.fail(s, set)
			clk.Advance(60*time.Second + 30*time.Minute)
			r, src, err := c.Answer(ctx, query("web.example.", dns.TypeA))
			if !tc.stale {
				if err != nil || src != Miss || r.Rcode != tc.rcode {
					t.Fatalf("got %v %v %v, want rcode %d from upstream", src, r, err, tc.rcode)
				}
				return
			}
			if err != nil || src != Stale || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
				t.Fatalf("got %v %v %v, want the stale answer with TTL 30", src, r, err)
			}
			// Within the recheck timer (StaleTTL) the upstream is not asked.
			asked := s.Count()
			clk.Advance(29 * time.Second)
			if _, src, _ := c.Answer(ctx, query("web.example.", dns.TypeA)); src != Stale || s.Count() != asked {
				t.Fatalf("within the recheck timer: %v, upstream asked %d more", src, s.Count()-asked)
			}
			if got := c.stale.Load(); got != 2 {
				t.Errorf("stale_total %d, want 2", got)
			}
			// Beyond ServeStale past expiry: the failure.
			clk.Advance(30*time.Minute + time.Second)
			r, src, err = c.Answer(ctx, query("web.example.", dns.TypeA))
			if src == Stale || (err == nil && r.Rcode == dns.RcodeSuccess) {
				t.Fatalf("beyond the window: %v %v %v, want the failure", src, r, err)
			}
			if c.Len(Success) != 0 {
				t.Errorf("the expired answer is still kept")
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		fail := false
		next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
			if fail {
				return nil, errors.New("down")
			}
			r := new(dns.Msg)
			r.SetReply(q)
			r.Answer = []dns.RR{rrA(q.Question[0].Name, 60)}
			return r, nil
		}}
		c, clk := newCache(t, next, Config{})
		c.Exchange(context.Background(), query("web.example.", dns.TypeA))
		fail = true
		clk.Advance(61 * time.Second)
		if _, err := c.Exchange(context.Background(), query("web.example.", dns.TypeA)); err == nil {
			t.Fatal("served stale with ServeStale off")
		}
	})
}

// answer completes a stub's reply.
type answer = func(q dns.Question, r *dns.Msg)

// TestPrefetch: a popular answer is refreshed before it expires: the
// upstream sees the second query while the entry is still fresh, and later
// hits are served from the refreshed entry. Whether a hit started a refresh
// is read from the cache's own slot count, taken before Answer returns, so
// the "not yet" checks do not race the refresh's goroutine.
func TestPrefetch(t *testing.T) {
	s := startStub(t, func(q dns.Question, r *dns.Msg) { r.Answer = []dns.RR{rrA(q.Name, 100)} })
	c, clk := newCache(t, udpNext{s.Addr}, Config{Prefetch: Prefetch{Amount: 3, Window: time.Minute, Percentage: 10}})
	ctx := context.Background()
	ask := func() (*dns.Msg, Source) {
		t.Helper()
		r, src, err := c.Answer(ctx, query("pop.example.", dns.TypeA))
		if err != nil {
			t.Fatal(err)
		}
		return r, src
	}
	started := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.prefetching > 0 || c.prefetches.Load() > 0
	}
	ask() // miss at 0 s; the counting window starts
	clk.Advance(30 * time.Second)
	for range 3 { // 3 hits in the window, but 70 s of 100 left: not due
		ask()
	}
	if started() {
		t.Fatal("prefetched with 70% of the TTL left")
	}
	clk.Advance(61 * time.Second)
	ask() // 91 s: a new window (hit 1), 9 s left
	ask() // hit 2
	if started() {
		t.Fatal("prefetched before Amount hits in the window")
	}
	if r, src := ask(); src != Hit || r.Answer[0].Header().Ttl != 9 { // hit 3: refresh
		t.Fatalf("hit 3: %v %v", src, r)
	}
	testkit.WaitEqual(t, 5*time.Second, "queries at the upstream (the miss, then the prefetch)", s.Count, 2)
	if now := c.nanos(); now >= int64(100*time.Second) {
		t.Fatalf("the upstream was asked at %v, after the entry expired", time.Duration(now))
	}
	c.Close() // waits for the refresh to be stored
	if got := c.prefetches.Load(); got != 1 {
		t.Errorf("prefetches_total %d, want 1", got)
	}
	clk.Advance(50 * time.Second) // 141 s: the old entry expired at 100 s
	if r, src := ask(); src != Hit || r.Answer[0].Header().Ttl != 50 || s.Count() != 2 {
		t.Fatalf("after the refresh: %v TTL %d, upstream asked %d times", src, r.Answer[0].Header().Ttl, s.Count())
	}
}

// TestCoalescing: identical misses in flight ask the upstream once.
func TestCoalescing(t *testing.T) {
	release := make(chan struct{})
	s := startStub(t, func(q dns.Question, r *dns.Msg) {
		<-release
		r.Answer = []dns.RR{rrA(q.Name, 30)}
	})
	c, _ := newCache(t, udpNext{s.Addr}, Config{})
	const n = 20
	var wg sync.WaitGroup
	srcs := make(chan Source, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, src, err := c.Answer(context.Background(), query("slow.example.", dns.TypeA))
			if err != nil || len(r.Answer) != 1 {
				t.Errorf("answer %v %v", r, err)
			}
			srcs <- src
		}()
	}
	testkit.WaitEqual(t, 5*time.Second, "followers coalesced", c.coalesced.Load, n-1)
	close(release)
	wg.Wait()
	close(srcs)
	count := map[Source]int{}
	for s := range srcs {
		count[s]++
	}
	if s.Count() != 1 || count[Miss] != 1 || count[Coalesced] != n-1 {
		t.Fatalf("upstream asked %d times; sources %v", s.Count(), count)
	}
}

// TestCoalescingLeaderGone: a follower whose leader's caller went away
// asks again instead of sharing the cancellation.
func TestCoalescingLeaderGone(t *testing.T) {
	entered := make(chan struct{}, 2)
	leaderCtx, cancel := context.WithCancel(context.Background())
	blocking := &ctxNext{entered: entered, first: leaderCtx}
	c, _ := newCache(t, blocking, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(leaderCtx, query("a.example.", dns.TypeA))
		done <- err
	}()
	<-entered
	follower := make(chan *dns.Msg, 1)
	go func() {
		r, _ := c.Exchange(context.Background(), query("a.example.", dns.TypeA))
		follower <- r
	}()
	testkit.WaitEqual(t, 5*time.Second, "followers coalesced", c.coalesced.Load, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	if r := <-follower; r == nil || len(r.Answer) != 1 {
		t.Fatalf("follower got %v", r)
	}
}

// ctxNext blocks the query made with ctx first until it ends; others are
// answered at once.
type ctxNext struct {
	entered chan struct{}
	first   context.Context
}

func (n *ctxNext) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	if ctx == n.first {
		n.entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = []dns.RR{rrA(q.Question[0].Name, 30)}
	return r, nil
}

func TestConfigErrors(t *testing.T) {
	next := &nextFunc{}
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{SuccessBytes: -1}, "SuccessBytes"},
		{Config{DenialBytes: -1}, "DenialBytes"},
		{Config{MaxEntries: -1}, "MaxEntries"},
		{Config{MaxTTL: -time.Second}, "MaxTTL"},
		{Config{StaleTTL: time.Millisecond}, "StaleTTL"},
		{Config{MinTTL: 2 * time.Hour}, "MinTTL"},
		{Config{MinNegativeTTL: time.Hour}, "MinNegativeTTL"},
		{Config{ServeStale: -1}, "ServeStale"},
		{Config{StaleTTL: time.Millisecond}, "StaleTTL"},
		{Config{Prefetch: Prefetch{Amount: -1}}, "Prefetch.Amount"},
		{Config{Prefetch: Prefetch{Amount: 1, Percentage: 95}}, "Prefetch.Percentage"},
		{Config{MaxTTL: 1 << 32 * time.Second}, "MaxTTL"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := New(next, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("nil next accepted")
	}
}

// TestMetrics: the collector's names and server label, on a registry
// shared by two caches.
func TestMetrics(t *testing.T) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		switch q.Question[0].Name {
		case "nx.example.":
			r.Rcode = dns.RcodeNameError
			r.Ns = []dns.RR{soa("example.", 60, 60)}
		case "fail.example.":
			r.Rcode = dns.RcodeServerFailure
		default:
			r.Answer = []dns.RR{rrA(q.Question[0].Name, 60)}
		}
		return r, nil
	}}
	reg := prometheus.NewPedanticRegistry()
	a, _ := newCache(t, next, Config{Server: "cluster"})
	b, _ := newCache(t, next, Config{Server: "nodelocal"})
	reg.MustRegister(a, b)
	for _, name := range []string{"ok.example.", "ok.example.", "nx.example.", "nx.example.", "fail.example."} {
		a.Exchange(context.Background(), query(name, dns.TypeA))
	}
	got := testkit.Gather(t, reg)
	for name, want := range map[string]float64{
		`dnsconfigurer_cache_hits_total{kind="success",server="cluster"}`:      1,
		`dnsconfigurer_cache_hits_total{kind="denial",server="cluster"}`:       1,
		`dnsconfigurer_cache_misses_total{kind="success",server="cluster"}`:    1,
		`dnsconfigurer_cache_misses_total{kind="denial",server="cluster"}`:     1,
		`dnsconfigurer_cache_misses_total{kind="other",server="cluster"}`:      1,
		`dnsconfigurer_cache_entries{kind="success",server="cluster"}`:         1,
		`dnsconfigurer_cache_entries{kind="denial",server="cluster"}`:          1,
		`dnsconfigurer_cache_stale_total{server="cluster"}`:                    0,
		`dnsconfigurer_cache_prefetches_total{server="cluster"}`:               0,
		`dnsconfigurer_cache_evictions_total{kind="success",server="cluster"}`: 0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if got[`dnsconfigurer_cache_bytes{kind="success",server="cluster"}`] <= 0 {
		t.Error("bytes{success} not reported")
	}
}

// TestPrefetchBounded: however many popular answers are due, at most
// MaxPrefetches refreshes run at once.
func TestPrefetchBounded(t *testing.T) {
	release := make(chan struct{})
	var refreshing bool
	var mu sync.Mutex
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		mu.Lock()
		block := refreshing
		mu.Unlock()
		if block {
			<-release
		}
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 100)}
		return r, nil
	}}
	c, clk := newCache(t, next, Config{Prefetch: Prefetch{Amount: 1}})
	const n = 10
	for i := range n {
		c.Exchange(context.Background(), query("p"+itoa(i)+".example.", dns.TypeA))
	}
	mu.Lock()
	refreshing = true
	mu.Unlock()
	clk.Advance(95 * time.Second)
	for i := range n {
		if _, src, err := c.Answer(context.Background(), query("p"+itoa(i)+".example.", dns.TypeA)); err != nil || src != Hit {
			t.Fatalf("hit %d: %v %v", i, src, err)
		}
	}
	c.mu.Lock()
	running := c.prefetching
	c.mu.Unlock()
	if running != MaxPrefetches {
		t.Fatalf("%d refreshes running, want %d", running, MaxPrefetches)
	}
	testkit.WaitEqual(t, 5*time.Second, "queries at next (the misses, then the refreshes)", next.calls.Load, n+MaxPrefetches)
	close(release)
	c.Close()
	if got := c.prefetches.Load(); got != MaxPrefetches {
		t.Errorf("prefetches_total %d, want %d", got, MaxPrefetches)
	}
}

// loopNext is a next step that blocks every query until release and says
// a query whose Id is looped came back round a loop (LoopChecker).
type loopNext struct {
	nextFunc
	looped uint16
}

var errLooped = errors.New("looped")

func (n *loopNext) CheckLoop(m *dns.Msg) error {
	if m.Id == n.looped {
		return errLooped
	}
	return nil
}

// TestLoopChecker: a miss that next's LoopChecker calls a loop fails at
// once with its error, without joining the identical query in flight (its
// own, one lap earlier) nor asking next; a hit is still answered.
func TestLoopChecker(t *testing.T) {
	release := make(chan struct{})
	next := &loopNext{looped: 7, nextFunc: nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		<-release
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer = []dns.RR{rrA(q.Question[0].Name, 30)}
		return r, nil
	}}}
	c, _ := newCache(t, next, Config{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(context.Background(), query("loop.example.", dns.TypeA))
		done <- err
	}()
	testkit.WaitEqual(t, 5*time.Second, "queries at next", next.calls.Load, 1)
	back := query("loop.example.", dns.TypeA)
	back.Id = 7
	// Bounded: the flight it must not join ends only on release.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, src, err := c.Answer(ctx, back); !errors.Is(err, errLooped) || src != Miss {
		t.Errorf("the query that came back: %v %v, want %v at once", src, err, errLooped)
	}
	if n := c.coalesced.Load(); n != 0 {
		t.Errorf("coalesced %d, want 0", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, src, err := c.Answer(context.Background(), back); err != nil || src != Hit || len(r.Answer) != 1 {
		t.Errorf("the looped query once cached: %v %v %v, want a hit", r, src, err)
	}
	if n := next.calls.Load(); n != 1 {
		t.Errorf("next asked %d times, want 1", n)
	}
}

// TestDefaultCaps: a zero Config caps answers at the ServerConfiguration's
// defaults, 30 s and 5 s, as serve and node-local do.
func TestDefaultCaps(t *testing.T) {
	c, err := New(&nextFunc{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.cfg.MaxTTL != 30*time.Second || c.cfg.MaxNegativeTTL != 5*time.Second {
		t.Errorf("caps %v and %v, want 30s and 5s", c.cfg.MaxTTL, c.cfg.MaxNegativeTTL)
	}
}
