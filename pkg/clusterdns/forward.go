package clusterdns

import (
	"context"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/miekg/dns"
)

// Exchanger sends a query upstream and returns the reply.
// *forward.Forwarder, *forward.Router and *dnscache.Cache implement it.
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// AnswerCache is a forwarder that caches answers and lets the handler
// keep its finished replies with them, for the wire. *dnscache.Cache
// implements it.
type AnswerCache interface {
	Exchanger
	// AnswerTicket is Exchange, with a ticket for Keep when the answer
	// came from the cache.
	AnswerTicket(ctx context.Context, m *dns.Msg) (*dns.Msg, dnscache.Source, dnscache.Ticket, error)
	// Keep keeps the finished reply made from a ticket's answer, for
	// queries of shape.
	Keep(t dnscache.Ticket, shape uint32, reply []byte)
	// AnswerWire writes the kept reply to q, for its shape.
	AnswerWire(dst []byte, q dnsmsg.WireQuery, shape uint32) ([]byte, bool)
}

// WithAnswerCache forwards through c, as WithForwarder, and answers from
// its kept replies on the wire (forwardedWire).
func WithAnswerCache(c AnswerCache) Option {
	return func(h *Handler) { h.fwd, h.answers = c, c }
}

// forwardQuestion asks upstream a question of ours (an ExternalName's
// target, an autopath candidate): REFUSED without a forwarder.
func (h *Handler) forwardQuestion(ctx context.Context, q dns.Question) Result {
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeRefused}
	}
	r, err := h.fwd.Exchange(ctx, dnsmsg.Query(q, false))
	if err != nil {
		h.log.DebugContext(ctx, "forward failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return Result{Rcode: forward.Rcode(err), Forwarded: true}
	}
	return Result{Rcode: r.Rcode, Answer: clip(r.Answer), Ns: clip(r.Ns), Extra: clip(dnsmsg.WithoutOPT(r.Extra)), Forwarded: true}
}

// forwardMsg relays the client's query upstream as it is (keeping its EDNS0
// options and DO bit) and returns the reply, ready for our OPT, and the
// answer cache's ticket when it answered from its cache (WithAnswerCache).
func (h *Handler) forwardMsg(ctx context.Context, req *dns.Msg) (*dns.Msg, dnscache.Ticket, error) {
	// The question and the OPT only: records a client put in the other
	// sections (TSIG included) are not relayed. The Forwarder rewrites the
	// OPT (size, loop marker).
	up := new(dns.Msg)
	up.MsgHdr = req.MsgHdr
	up.Id = dns.Id()
	up.Response, up.Rcode = false, dns.RcodeSuccess
	up.Question = req.Question
	if opt := req.IsEdns0(); opt != nil {
		up.Extra = []dns.RR{opt}
	} else {
		up.SetEdns0(dnsmsg.EDNSSize, false)
	}
	var r *dns.Msg
	var t dnscache.Ticket
	var err error
	if h.answers != nil {
		r, _, t, err = h.answers.AnswerTicket(ctx, up)
	} else {
		r, err = h.fwd.Exchange(ctx, up)
	}
	if err != nil {
		q := req.Question[0]
		h.log.DebugContext(ctx, "forward failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return nil, dnscache.Ticket{}, err
	}
	r.Id = req.Id
	r.Question = req.Question
	r.Extra = dnsmsg.WithoutOPT(r.Extra)
	r.RecursionAvailable = true
	r.Compress = true
	return r, t, nil
}

// forwardShape is the shape (dnsmsg.Shape) under which a finished forwarded
// reply is kept in the answer cache: with load balancing on, only replies
// with nothing to rotate are kept, so they are kept apart from those made
// without it (a reload may switch it and keep the cache).
func (h *Handler) forwardShape(opt *dns.OPT) uint32 { return shapeLB(dnsmsg.Shape(opt), h.lb) }

func shapeLB(shape uint32, lb bool) uint32 {
	if lb {
		shape |= 1 << 17
	}
	return shape
}
