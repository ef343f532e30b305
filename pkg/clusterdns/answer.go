package clusterdns

import (
	"context"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
)

// answer makes the reply to q, which the reply cache did not have, and
// packs it in buf. It is nil when not even a SERVFAIL packs.
func (q *query) answer(buf []byte) []byte {
	if q.bySource {
		if b, ok := q.answerBySource(buf); ok {
			return b
		}
		q.bySource = false // a reply that does not pack is left to the normal path
	}
	q.reply = dnsmsg.Finish(q.req, q.answerMsg(), q.tcp)
	b, err := q.reply.PackBuffer(buf)
	if err == nil {
		return b
	}
	q.h.log.Debug("pack reply", "err", err)
	q.ticket = dnscache.Ticket{}
	q.reply = new(dns.Msg)
	q.reply.SetRcode(q.req, dns.RcodeServerFailure)
	if b, err = q.reply.PackBuffer(buf); err != nil {
		return nil
	}
	return b
}

// answerMsg is q's reply before dnsmsg.Finish, so that every reply, an
// error's too, is finished in one place. It decides how q is answered,
// renames the question when a rewrite matches, and notes in q what the
// account stage needs: whether the reply is the zone's alone, the names it
// was made from, the answer cache's ticket of a forwarded reply that
// nothing here changed per reply (no rewrite, no rotation), and how a UDP
// reply made here was cut to the answer limit.
func (q *query) answerMsg() *dns.Msg {
	h := q.h
	m := new(dns.Msg)
	m.SetReply(q.req)
	m.RecursionAvailable = h.fwd != nil
	if q.rcode != dns.RcodeSuccess {
		m.Rcode = q.rcode
		return m
	}
	a := q.asked()
	q.d = decide(h, q.z, a.Qtype, a.Qclass, a.lname)
	var rev *reversal
	if q.d.rewrite {
		var err error
		if rev, err = h.rw.rewrite(a.lname); err != nil {
			return h.rewriteFailed(q.req, err)
		}
		if rev != nil {
			a.Name, a.lname = rev.name(), rev.name()
			q.d = decide(h, q.z, a.Qtype, a.Qclass, a.lname)
		}
	}
	ctx := context.Background()
	made := false // answered here, not relayed from upstream: cut to the UDP answer limit
	switch q.d.route {
	case routeAutopath:
		// Never cached: the answer depends on the search-list option.
		// Candidates outside the zone (host search domains) are each
		// forwarded: together they get one forwarding timeout.
		actx, cancel := context.WithTimeout(ctx, forward.DefaultTimeout)
		fill(m, h.ap.expand(actx, h, q.req, a.from, q.client.topo, h.autopathTTL()))
		cancel()
		made = true
	case routeForward:
		if r, err := q.forwardMsg(ctx, a.Question); err == nil {
			m = r
		} else {
			// SERVFAIL, or the forwarder's shed rcode (REFUSED).
			m.Rcode = forward.Rcode(err)
		}
	default:
		r := h.resolve(ctx, a, q.d)
		q.local = !r.Forwarded && !r.volatile
		q.deps = r.deps
		fill(m, r)
		made = true
	}
	if rev != nil {
		m.Question = q.req.Question // the question as asked
		if err := rev.msg(m); err != nil {
			q.local, q.deps, q.ticket = false, nil, dnscache.Ticket{}
			return h.rewriteFailed(q.req, err)
		}
		q.deps = append(q.deps, rev.names...)
	}
	if made {
		q.cut = h.limitUDP(m, q.tcp)
	}
	if h.lb {
		if r := dnsmsg.RotateAnswer(m.Answer, h.lbN.Add(1)); len(r) > 0 && &r[0] != &m.Answer[0] {
			m.Answer, q.ticket = r, dnscache.Ticket{}
		}
	}
	if q.d.rewrite || (h.ap != nil && h.ap.sourceIP) {
		q.ticket = dnscache.Ticket{} // AnswerWire would not use it
	}
	return m
}

// answerBySource answers q, a first search step of a known pod
// (WithAutopathBySource), each candidate with its variant for the client,
// and packs the reply in buf. False when the reply does not pack.
func (q *query) answerBySource(buf []byte) ([]byte, bool) {
	h, z := q.h, q.z
	r := h.ap.bySource(context.Background(), h, q.asked(), q.client, z.ttl)
	if r.Rcode == dns.RcodeNameError {
		r.Ns = z.negative(q.lower())
	}
	m := new(dns.Msg)
	m.SetReply(q.req)
	m.RecursionAvailable = h.fwd != nil
	fill(m, r)
	m = dnsmsg.Finish(q.req, m, q.tcp)
	h.limitUDP(m, q.tcp)
	if h.lb {
		m.Answer = dnsmsg.RotateAnswer(m.Answer, h.lbN.Add(1))
	}
	b, err := m.PackBuffer(buf)
	if err != nil {
		return nil, false
	}
	q.reply = m
	return b, true
}

// rewriteFailed is asked's SERVFAIL when a rewrite made an invalid name.
func (h *Handler) rewriteFailed(asked *dns.Msg, err error) *dns.Msg {
	h.log.Debug("rewrite", "name", asked.Question[0].Name, "err", err)
	m := new(dns.Msg)
	m.SetRcode(asked, dns.RcodeServerFailure)
	m.RecursionAvailable = h.fwd != nil
	return m
}
