package dnscache

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// keepHit answers q, which must be a hit, keeps its reply packed as the
// form of shape, and returns the packed reply.
func keepHit(t *testing.T, c *Cache, q *dns.Msg, shape uint32) []byte {
	t.Helper()
	ans, err := c.AnswerTicket(context.Background(), q, dnsmsg.Origin{})
	r, src, tk := ans.Msg, ans.Source, ans.Ticket
	if err != nil || src != Hit {
		t.Fatalf("AnswerTicket: %v, %v; want a hit", src, err)
	}
	b, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	c.Keep(tk, shape, b)
	return b
}

// wireAnswer is AnswerWire's reply to q.
func wireAnswer(t *testing.T, c *Cache, q *dns.Msg, shape uint32) ([]byte, bool) {
	t.Helper()
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	wq, ok := dnsmsg.ParseQuery(b)
	if !ok {
		t.Fatalf("ParseQuery does not read %v", q)
	}
	return c.AnswerWire(nil, wq, shape)
}

// replyPacked is AnswerTicket's reply to q, packed.
func replyPacked(t *testing.T, c *Cache, q *dns.Msg) []byte {
	t.Helper()
	ans, err := c.AnswerTicket(context.Background(), q, dnsmsg.Origin{})
	r, _, _ := ans.Msg, ans.Source, ans.Ticket
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answerNext answers A with one record (TTL 100) and a denial (NODATA, an
// SOA with TTL 60 and minimum 20, and a record of TTL 5 beside it) for
// every other type.
func answerNext() *nextFunc {
	return &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		name := q.Question[0].Name
		if q.Question[0].Qtype == dns.TypeA {
			r.Answer = []dns.RR{rrA(name, 100)}
		} else {
			r.Ns = []dns.RR{soa("example.", 60, 20), &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5}, Txt: []string{"x"}}}
		}
		return r, nil
	}}
}

// TestAnswerWire: a kept reply answers queries of its shape and name as
// sent with the bytes AnswerTicket's reply packs to, for their ID and RD
// and CD bits and aged as they age, until the answer expires.
func TestAnswerWire(t *testing.T) {
	c, clk := newCache(t, answerNext(), Config{})
	q := query("Web.Example.", dns.TypeA)
	c.Exchange(context.Background(), q)
	if _, ok := wireAnswer(t, c, q, 7); ok {
		t.Fatal("AnswerWire answered without a kept reply")
	}
	clk.Advance(3 * time.Second)
	keepHit(t, c, q, 7)
	for _, tc := range []struct {
		advance time.Duration
		id      uint16
		rd      bool
	}{{0, 1, true}, {999 * time.Millisecond, 2, false}, {time.Millisecond, 3, true}, {60 * time.Second, 0xffff, false}, {35 * time.Second, 9, true}} {
		clk.Advance(tc.advance)
		q := q.Copy()
		q.Id, q.RecursionDesired = tc.id, tc.rd
		if !tc.rd {
			// RD is in the key: the RD=1 answer is not the RD=0 one.
			if _, ok := wireAnswer(t, c, q, 7); ok {
				t.Fatalf("after %v: AnswerWire answered RD=0 from the RD=1 answer", tc.advance)
			}
			continue
		}
		got, ok := wireAnswer(t, c, q, 7)
		want := replyPacked(t, c, q)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("after %v: AnswerWire (%v)\n%x\nAnswerTicket\n%x", tc.advance, ok, got, want)
		}
	}
	for _, other := range []struct {
		name  string
		q     *dns.Msg
		shape uint32
	}{
		{"another shape", q, 8},
		{"another case", query("web.example.", dns.TypeA), 7},
		{"CD", func() *dns.Msg { q := q.Copy(); q.CheckingDisabled = true; return q }(), 7},
		{"DO", func() *dns.Msg { q := q.Copy(); q.SetEdns0(1232, true); return q }(), 7},
		{"another type", query("Web.Example.", dns.TypeAAAA), 7},
	} {
		if _, ok := wireAnswer(t, c, other.q, other.shape); ok {
			t.Errorf("%s: answered from a reply kept for another query", other.name)
		}
	}
	clk.Advance(time.Second) // 100 s after it was cached
	if _, ok := wireAnswer(t, c, q, 7); ok {
		t.Fatal("AnswerWire answered an expired answer")
	}
}

// TestKeepRefuses: a reply is not kept for an answer replaced since, for
// another question, when malformed, when a TTL aged to 0 hides the TTL as
// cached, nor more than MaxForms per answer.
func TestKeepRefuses(t *testing.T) {
	c, clk := newCache(t, answerNext(), Config{})
	q := query("a.example.", dns.TypeA)
	c.Exchange(context.Background(), q)
	ans, _ := c.AnswerTicket(context.Background(), q, dnsmsg.Origin{})
	r, _, tk := ans.Msg, ans.Source, ans.Ticket
	good, _ := r.Pack()

	other := r.Copy()
	other.Question[0].Name = "b.example."
	otherB, _ := other.Pack()
	escaped := r.Copy()
	escaped.Question[0].Name = `a\.example.`
	escapedB, _ := escaped.Pack()
	for _, tc := range []struct {
		name  string
		t     Ticket
		reply []byte
	}{
		{"zero ticket", Ticket{}, good},
		{"another question", tk, otherB},
		{"escaped name", tk, escapedB},
		{"cut", tk, good[:len(good)-1]},
		{"trailing byte", tk, append(append([]byte(nil), good...), 0)},
		{"header only", tk, good[:12]},
		{"nothing", tk, nil},
	} {
		c.Keep(tc.t, 1, tc.reply)
		if _, ok := wireAnswer(t, c, q, 1); ok {
			t.Fatalf("%s: kept", tc.name)
		}
	}
	before := c.Bytes(Success)
	c.Keep(tk, 1, good)
	c.Keep(tk, 1, good)
	if _, ok := wireAnswer(t, c, q, 1); !ok {
		t.Fatal("good reply not kept")
	}
	if c.Bytes(Success) <= before {
		t.Fatalf("kept reply not counted: %d bytes before, %d after", before, c.Bytes(Success))
	}
	once := c.Bytes(Success) - before

	// MaxForms shapes, then no more.
	for shape := uint32(2); shape <= MaxForms+1; shape++ {
		keepHit(t, c, q, shape)
		_, ok := wireAnswer(t, c, q, shape)
		if want := shape <= MaxForms; ok != want {
			t.Fatalf("shape %d kept: %v, want %v", shape, ok, want)
		}
	}
	if got := c.Bytes(Success) - before; got != MaxForms*once {
		t.Fatalf("%d forms account %d bytes, want %d", MaxForms, got, MaxForms*once)
	}

	// A ticket of an answer replaced since.
	clk.Advance(101 * time.Second)
	c.Exchange(context.Background(), q)
	c.Keep(tk, 1, good)
	if _, ok := wireAnswer(t, c, q, 1); ok {
		t.Fatal("a reply of the answer replaced was kept with the new one")
	}

	// A denial with a record whose TTL (5) aged to 0 while the SOA's (20)
	// has not: not kept; kept when nothing aged to 0.
	d := query("d.example.", dns.TypeTXT)
	c.Exchange(context.Background(), d)
	clk.Advance(2 * time.Second)
	keepHit(t, c, d, 1)
	if _, ok := wireAnswer(t, c, d, 1); !ok {
		t.Fatal("denial reply not kept")
	}
	clk.Advance(4 * time.Second)
	keepHit(t, c, d, 2)
	if _, ok := wireAnswer(t, c, d, 2); ok {
		t.Fatal("a reply with a TTL aged to 0 was kept")
	}
	got, ok := wireAnswer(t, c, d, 1)
	if want := replyPacked(t, c, d); !ok || !bytes.Equal(got, want) {
		t.Fatalf("denial 6 s on: AnswerWire (%v)\n%x\nAnswerTicket\n%x", ok, got, want)
	}
}

// TestKeepBytes: kept replies count against their kind's capacity; keeping
// one evicts the least recently used other answers, never its own, and a
// reply that does not fit with its answer alone is not kept.
func TestKeepBytes(t *testing.T) {
	const capacity = 3 * (EntryOverhead + 200)
	c, _ := newCache(t, answerNext(), Config{SuccessBytes: capacity})
	names := []string{"a.example.", "b.example.", "c.example."}
	for _, n := range names {
		c.Exchange(context.Background(), query(n, dns.TypeA))
	}
	if c.Len(Success) != 3 {
		t.Fatalf("%d answers cached, want 3", c.Len(Success))
	}
	// c is the most recently used; its forms push out a.
	q := query("c.example.", dns.TypeA)
	for shape := uint32(1); shape <= MaxForms; shape++ {
		keepHit(t, c, q, shape)
		if c.Bytes(Success) > capacity {
			t.Fatalf("%d bytes, over %d", c.Bytes(Success), capacity)
		}
	}
	for shape := uint32(1); shape <= MaxForms; shape++ {
		if _, ok := wireAnswer(t, c, q, shape); !ok && c.Len(Success) > 1 {
			t.Fatalf("shape %d not kept while other answers could make room", shape)
		}
	}
	if _, src, err := c.Answer(context.Background(), q); err != nil || src != Hit {
		t.Fatalf("c evicted for its own forms: %v, %v", src, err)
	}
	if _, src, _ := c.Answer(context.Background(), query("a.example.", dns.TypeA)); src == Hit {
		t.Fatal("a, the least recently used, not evicted for c's forms")
	}

	// An answer alone at capacity keeps no form.
	tiny, _ := newCache(t, answerNext(), Config{SuccessBytes: EntryOverhead + 100})
	q = query("a.example.", dns.TypeA)
	tiny.Exchange(context.Background(), q)
	keepHit(t, tiny, q, 1)
	if _, ok := wireAnswer(t, tiny, q, 1); ok || tiny.Bytes(Success) > EntryOverhead+100 {
		t.Fatalf("kept a form over the capacity: %d bytes", tiny.Bytes(Success))
	}
}

// TestAnswerWirePrefetch: wire answers count towards a prefetch and start
// it, as the other hits.
func TestAnswerWirePrefetch(t *testing.T) {
	next := answerNext()
	c, clk := newCache(t, next, Config{Prefetch: Prefetch{Amount: 2, Window: 10 * time.Minute, Percentage: 10}})
	q := query("p.example.", dns.TypeA)
	c.Exchange(context.Background(), q)
	keepHit(t, c, q, 1) // hit 1
	clk.Advance(95 * time.Second)
	if _, ok := wireAnswer(t, c, q, 1); !ok { // hit 2, 5 s of 100 left
		t.Fatal("no wire answer")
	}
	testkit.WaitEqual(t, 5*time.Second, "queries at next (the miss, then the prefetch)", next.calls.Load, 2)
}
