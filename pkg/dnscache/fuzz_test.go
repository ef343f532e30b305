package dnscache

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// FuzzCache feeds arbitrary upstream replies to a small cache: it never
// panics, stays within its byte bounds, never serves a TTL over the caps,
// and every reply it builds carries the query's ID and question; a reply
// kept for wire answers (Keep, including the upstream's bytes as they
// came) keeps it within its bounds, and AnswerWire gives the bytes that
// AnswerTicket's reply packs to at the same moment.
func FuzzCache(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	const successBytes, denialBytes = 4 << 10, 2 << 10
	f.Fuzz(func(t *testing.T, wire []byte) {
		next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
			r := new(dns.Msg)
			if err := r.Unpack(wire); err != nil {
				return nil, errors.New("bad reply")
			}
			return r, nil
		}}
		c, clk := newCache(t, next, Config{SuccessBytes: successBytes, DenialBytes: denialBytes,
			MaxTTL: 60 * time.Second, MaxNegativeTTL: 10 * time.Second, ServeStale: time.Minute})
		qs := []*dns.Msg{query("a.example.", dns.TypeA)}
		var r dns.Msg
		if r.Unpack(wire) == nil && len(r.Question) == 1 {
			q := new(dns.Msg)
			q.Question = []dns.Question{r.Question[0]}
			q.Id = 7
			if r.IsEdns0() != nil {
				q.SetEdns0(1232, r.IsEdns0().Do())
			}
			qs = append(qs, q)
		}
		for round := range 3 {
			for _, q := range qs {
				ans, err := c.AnswerTicket(context.Background(), q, dnsmsg.Origin{})
				got, src, tk := ans.Msg, ans.Source, ans.Ticket
				if err != nil {
					continue
				}
				if src == Hit {
					checkKeep(t, c, q, got, tk, wire)
				}
				if got.Id != q.Id {
					t.Fatalf("reply ID %d, want %d", got.Id, q.Id)
				}
				if got.IsEdns0() != nil {
					t.Fatal("reply carries the upstream's OPT")
				}
				if c.Bytes(Success) > successBytes || c.Bytes(Denial) > denialBytes {
					t.Fatalf("cache accounts %d and %d bytes, over %d and %d", c.Bytes(Success), c.Bytes(Denial), successBytes, denialBytes)
				}
				if round > 0 && len(got.Question) == 1 && got.Question[0] == q.Question[0] {
					if _, src, _ := c.Answer(context.Background(), q); src == Hit {
						for _, ttl := range ttls(got) {
							if ttl > 60 {
								t.Fatalf("cached reply with TTL %d over MaxTTL", ttl)
							}
						}
					}
				}
			}
			clk.Advance(45 * time.Second)
		}
	})
}

// checkKeep keeps got, the reply to q that came with tk, and wire, as
// replies of two shapes, and checks that AnswerWire then answers q with
// got's bytes (when dnsmsg.ParseQuery reads q) and the bounds hold.
func checkKeep(t *testing.T, c *Cache, q, got *dns.Msg, tk Ticket, wire []byte) {
	t.Helper()
	packed, err := got.Pack()
	if err != nil {
		return
	}
	c.Keep(tk, 1, packed)
	c.Keep(tk, 2, wire)
	if c.Bytes(Success) > c.cfg.SuccessBytes || c.Bytes(Denial) > c.cfg.DenialBytes {
		t.Fatalf("cache accounts %d and %d bytes with forms kept, over %d and %d", c.Bytes(Success), c.Bytes(Denial), c.cfg.SuccessBytes, c.cfg.DenialBytes)
	}
	b, err := q.Pack()
	if err != nil {
		return
	}
	wq, ok := dnsmsg.ParseQuery(b)
	if !ok {
		return
	}
	for _, shape := range []uint32{2, 3} {
		c.AnswerWire(nil, wq, shape) // never panics
	}
	if w, ok := c.AnswerWire(nil, wq, 1); ok && !bytes.Equal(w, packed) {
		t.Fatalf("AnswerWire\n%x\nAnswerTicket's reply\n%x", w, packed)
	}
}

// fuzzSeeds are upstream replies of each kind (also committed under
// testdata/fuzz/FuzzCache).
func fuzzSeeds() [][]byte {
	mk := func(f func(r *dns.Msg)) []byte {
		r := new(dns.Msg)
		r.SetQuestion("a.example.", dns.TypeA)
		r.Response = true
		f(r)
		b, err := r.Pack()
		if err != nil {
			panic(err)
		}
		return b
	}
	return [][]byte{
		mk(func(r *dns.Msg) { r.Answer = []dns.RR{rrA("a.example.", 300), rrA("a.example.", 5)} }),
		mk(func(r *dns.Msg) { r.Rcode = dns.RcodeNameError; r.Ns = []dns.RR{soa("example.", 3600, 30)} }),
		mk(func(r *dns.Msg) { r.Ns = []dns.RR{soa("example.", 0, 0)}; r.SetEdns0(4096, true) }),
		mk(func(r *dns.Msg) { r.Rcode = dns.RcodeServerFailure }),
		mk(func(r *dns.Msg) {
			r.Question[0].Name = "B.example."
			r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "b.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{string(make([]byte, 255)), string(make([]byte, 255))}}}
			r.Truncated = true
		}),
	}
}
