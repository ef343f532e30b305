package clusterdns

import (
	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// account counts q, answered with b (q.reply packed), in the namespace
// metrics, and keeps the reply where the next query finds it: a zone
// reply in the reply cache, a forwarded one with the answer cache's
// answer, for AnswerWire. Both happen before the reply leaves: a client
// that has its answer sees it counted, and its next query finds it.
func (q *query) account(b []byte) {
	h, m := q.h, q.reply
	keep := q.cacheable && q.local && q.z != nil
	var tally uint64
	if h.amp != nil && q.plain() {
		var snap *store.Snapshot
		if q.z != nil {
			snap = q.z.snap
		}
		deps := q.deps
		var dep func(string)
		if keep {
			dep = func(n string) { deps = append(deps, n) }
		}
		tally = h.amp.Record(q.req.Question[0].Name, snap, m.Rcode, q.bySource, dep)
		q.deps = deps
	}
	if keep {
		h.keep(q, b, tally)
	}
	if q.ticket != (dnscache.Ticket{}) && !q.tcp && tally == 0 {
		h.answers.Keep(q.ticket, h.forwardShape(q.opt), b)
	}
}

// keep puts q's reply, packed as b, in the reply cache under q's key,
// retired with the question's name and the names it was made from. tally
// is what it added to the namespace metrics. Only NOERROR and NXDOMAIN
// replies are kept.
func (h *Handler) keep(q *query, b []byte, tally uint64) {
	m := q.reply
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return
	}
	r := &reply{tally: tally}
	if q.cut != nil {
		// Kept whole, to hand out the next window on each hit.
		w, ok := h.windowReply(m, q.cut, int(q.key.Limit))
		if !ok {
			return
		}
		r.Reply = w
	} else {
		r.Reply = replycache.NewReply(append([]byte(nil), b...), h.lb)
	}
	h.wire.Put(q.key, r, r.Len(), q.z.epoch, append(q.deps, q.lower()))
}

// windowReply is what the reply cache keeps of m, a finished UDP reply
// whose answer was cut: m packed with its whole answer, handing out the
// next records on each hit. It is false when m was truncated, when
// replycache.NewWindow refuses, or when a window could outgrow size.
// Loadbalance adds nothing: the window moves on every hit.
func (h *Handler) windowReply(m *dns.Msg, cut *udpCut, size int) (replycache.Reply, bool) {
	if m.Truncated {
		return replycache.Reply{}, false
	}
	whole := *m
	whole.Answer = cut.full
	b, err := whole.Pack()
	if err != nil {
		return replycache.Reply{}, false
	}
	r, ok := replycache.NewWindow(b, h.udpLimit, cut.c)
	if !ok || r.MaxLen() > size {
		return replycache.Reply{}, false
	}
	return r, true
}
