package clusterdns

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// query is one query as every stage reads it. admit makes it from the
// message, admitWire from its bytes; then the stages, its methods, take it
// in turn (ServeDNS and AnswerWire are the two pipelines):
//
//	admit      admit.go    the checked query, its lowercase name, its client, its cache key
//	fromCache  cached.go   the reply cache
//	answer     answer.go   decide, then the zone, a rewrite, autopath or the forwarder
//	account    account.go  the namespace metrics and the caches' keeps
//
// A stage reads what the stages before it wrote and adds its own part;
// nothing of a query travels in a context.
type query struct {
	h *Handler

	// Written by admit.
	req    *dns.Msg         // the message path's query; nil on the wire path
	wire   dnsmsg.WireQuery // the wire path's query, when req is nil
	asWire []byte           // the wire path's name as asked, in the caller's buffer (key.Name borrows it)
	opt    *dns.OPT         // req's OPT, nil without EDNS0
	rcode  int              // dnsmsg.Check's: a query it refuses is answered with it
	tcp    bool             // asked over TCP
	lname  string           // the question's name in lowercase with its dot, made once (lower)
	client client
	z      *zone // the zone view the query is answered from; nil before the first sync
	// key is the reply cache's key, when cacheable.
	key       replycache.Key
	cacheable bool
	// bySource: autopath answers it by its source (never cached).
	bySource bool

	// Written by answer.
	d      decision
	reply  *dns.Msg
	local  bool     // made from the zone alone: the reply cache may keep it
	deps   []string // the lowercase names besides the question's it was made from
	ticket dnscache.Ticket
	cut    *udpCut
}

// client is who asks: the address the query came from, its place when
// known and needed (autopath may expand the query), its variant of the
// question's name ("" but for a name with variants), and its pod's
// namespace when autopath answers it by source.
type client struct {
	ip      netip.Addr
	topo    topology.Client
	variant store.Variant
	ns      string
}

// question is one question as the zone answers it: the question as asked (its
// name's case is echoed), that name in lowercase with its dot, the
// client's variant of it ("" for none), and who asks, for what is asked
// upstream on its behalf.
type question struct {
	dns.Question
	lname   string
	variant store.Variant
	from    dnsmsg.Origin
}

// asked is the question of q as the zone answers it. What the zone asks
// upstream for it (an ExternalName's target, an autopath candidate) goes
// over UDP, whatever the client's transport.
func (q *query) asked() question {
	return question{Question: q.req.Question[0], lname: q.lower(), variant: q.client.variant,
		from: dnsmsg.Origin{Client: q.client.ip}}
}

// plain reports whether q is a plain query: one question, opcode QUERY,
// not a response. The namespace metrics count only those.
func (q *query) plain() bool {
	return len(q.req.Question) == 1 && q.req.Opcode == dns.OpcodeQuery && !q.req.Response
}
