package nodelocal

import (
	"context"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// answerUpstream answers every A question with two A records (TTL 300).
type answerUpstream struct{}

func (answerUpstream) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	r := new(dns.Msg)
	r.SetReply(q)
	name := q.Question[0].Name
	for _, ip := range []net.IP{{192, 0, 2, 1}, {192, 0, 2, 2}} {
		r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: ip})
	}
	return r, nil
}

// benchHandler is a stage over answerUpstream and the query the
// benchmarks ask: www.example.com. A with EDNS0.
func benchHandler(b *testing.B) (*Handler, *dns.Msg) {
	h, err := New(answerUpstream{}, Config{})
	if err != nil {
		b.Fatal(err)
	}
	req := new(dns.Msg)
	req.SetQuestion("www.example.com.", dns.TypeA)
	req.SetEdns0(1232, false)
	return h, req
}

// BenchmarkCacheHit is the node-local stage's cache hit path: one cached
// answer of two A records, asked with EDNS0 over UDP.
func BenchmarkCacheHit(b *testing.B) {
	h, req := benchHandler(b)
	if r := h.Answer(context.Background(), req, false); len(r.Answer) != 2 {
		b.Fatalf("answer %v", r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := h.Answer(context.Background(), req, false); len(r.Answer) != 2 {
			b.Fatalf("answer %v", r)
		}
	}
}

// BenchmarkAnswerWire is the same hit answered from its wire form, as the
// server's UDP reader does once ServeDNS has kept the reply.
func BenchmarkAnswerWire(b *testing.B) {
	h, req := benchHandler(b)
	for range 2 { // a miss, then a hit whose reply is kept
		h.ServeDNS(&recorder{}, req)
	}
	q, err := req.Pack()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 512)
	if _, ok := h.AnswerWire(buf, q); !ok {
		b.Fatal("no wire answer")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, ok := h.AnswerWire(buf, q); !ok {
			b.Fatal("no wire answer")
		}
	}
}
