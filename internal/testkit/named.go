package testkit

import (
	"context"

	"github.com/miekg/dns"
)

// Named is an upstream that answers each query at once with one TXT
// record holding its name, so that a routing test reads which upstream
// answered. It has the Exchange method of forward's and nodelocal's
// upstreams.
type Named string

func (n Named) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{string(n)}}}
	return r, nil
}
