package clusterdns

import (
	"context"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// forwardMsg relays the client's query upstream, asking qn (its question,
// or the question a rewrite renamed it to), keeping its EDNS0 options and
// DO bit, and returns the reply, ready for our OPT. It is asked with the
// client's address and transport: over TCP when the client asked over TCP.
// When the answer cache answered from its cache (WithAnswerCache), its
// ticket is noted in q.
func (q *query) forwardMsg(ctx context.Context, qn dns.Question) (*dns.Msg, error) {
	h, req := q.h, q.req
	// The question and the OPT only: records a client put in the other
	// sections (TSIG included) are not relayed. The Forwarder rewrites the
	// OPT (size, loop marker).
	up := new(dns.Msg)
	up.MsgHdr = req.MsgHdr
	up.Id = dns.Id()
	up.Response, up.Rcode = false, dns.RcodeSuccess
	up.Question = req.Question
	if qn != req.Question[0] {
		up.Question = []dns.Question{qn}
	}
	if q.opt != nil {
		up.Extra = []dns.RR{q.opt}
	} else {
		up.SetEdns0(dnsmsg.EDNSSize, false)
	}
	o := dnsmsg.Origin{Client: q.client.ip, TCP: q.tcp}
	var r *dns.Msg
	var err error
	if h.answers != nil {
		var a dnscache.Answered
		a, err = h.answers.AnswerTicket(ctx, up, o)
		r, q.ticket = a.Msg, a.Ticket
	} else {
		r, err = forward.Ask(ctx, h.fwd, up, o)
	}
	if err != nil {
		h.log.DebugContext(ctx, "forward failed", "name", qn.Name, "type", dns.TypeToString[qn.Qtype], "err", err)
		return nil, err
	}
	r.Id = req.Id
	r.Question = up.Question
	r.Extra = dnsmsg.WithoutOPT(r.Extra)
	r.RecursionAvailable = true
	r.Compress = true
	return r, nil
}

// forwardQuestion asks upstream a question of ours (an ExternalName's
// target, an autopath candidate) on behalf of q.from: REFUSED without a
// forwarder.
func (h *Handler) forwardQuestion(ctx context.Context, qq question) Result {
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeRefused}
	}
	q := qq.Question
	r, err := forward.Ask(ctx, h.fwd, dnsmsg.Query(q, false), qq.from)
	if err != nil {
		h.log.DebugContext(ctx, "forward failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return Result{Rcode: forward.Rcode(err), Forwarded: true}
	}
	return Result{Rcode: r.Rcode, Answer: clip(r.Answer), Ns: clip(r.Ns), Extra: clip(dnsmsg.WithoutOPT(r.Extra)), Forwarded: true}
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
