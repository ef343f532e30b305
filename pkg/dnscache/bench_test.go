package dnscache

import (
	"context"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkHit is the cache hit path: one cached answer of two A records,
// asked with EDNS0.
func BenchmarkHit(b *testing.B) {
	next := &nextFunc{f: func(q *dns.Msg) (*dns.Msg, error) {
		r := new(dns.Msg)
		r.SetReply(q)
		for _, ip := range []net.IP{{192, 0, 2, 1}, {192, 0, 2, 2}} {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: ip})
		}
		return r, nil
	}}
	c, err := New(next, Config{})
	if err != nil {
		b.Fatal(err)
	}
	q := query("www.example.com.", dns.TypeA)
	q.SetEdns0(1232, false)
	ctx := context.Background()
	if r, err := c.Exchange(ctx, q); err != nil || len(r.Answer) != 2 {
		b.Fatalf("answer %v %v", r, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := c.Exchange(ctx, q); err != nil || len(r.Answer) != 2 {
			b.Fatalf("answer %v %v", r, err)
		}
	}
}
