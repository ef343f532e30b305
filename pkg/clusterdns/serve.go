package clusterdns

import (
	"context"
	"net"
	"net/netip"
	"sync"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/miekg/dns"
)

// ServeDNS implements dns.Handler. Replies answered from the zone are
// cached in packed form per snapshot (see replyCache), so a repeated
// question costs a map lookup, a copy and a write.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	opt, rcode := dnsmsg.Check(req) // once per query
	if h.ap != nil && h.ap.sourceIP && rcode == dns.RcodeSuccess {
		// Answers that depend on the source are never cached.
		if m, ok := h.answerBySource(context.Background(), w.RemoteAddr(), req, tcp); ok {
			h.limitUDP(m, tcp)
			if h.lb {
				m.Answer = rotateAnswer(m.Answer, h.lbN.Add(1))
			}
			if b, err := m.PackBuffer((*bp)[:cap(*bp)]); err == nil {
				*bp = b
				// Counted before the reply leaves: a client that has its
				// answer sees it in the metrics.
				if h.amp != nil {
					ac := h.amp.classify(req, h.records.Snapshot(), m.Rcode, true, nil)
					h.amp.observe(&ac)
				}
				h.write(w, b)
				return
			}
		}
	}

	key, cacheable := checkedKey(req, opt, rcode, tcp)
	var z *zone
	if cacheable {
		z = h.zone()
		if z != nil {
			if b, ok := h.cached((*bp)[:0], key, req.Id, req.RecursionDesired, req.CheckingDisabled); ok {
				*bp = b
				h.write(w, b)
				return
			}
		}
	}
	m, local, deps, ticket, cut := h.respond(context.Background(), req, rcode, tcp)
	b, err := m.PackBuffer((*bp)[:cap(*bp)])
	if err != nil {
		h.log.Debug("pack reply", "err", err)
		ticket = dnscache.Ticket{}
		m = new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		if b, err = m.PackBuffer((*bp)[:cap(*bp)]); err != nil {
			return
		}
	}
	*bp = b
	var ac ampCount
	if h.amp != nil {
		snap := h.records.Snapshot()
		if z != nil {
			snap = z.snap // the snapshot of the cached reply
		}
		var dep func(string)
		if cacheable && local {
			dep = func(n string) { deps = append(deps, n) }
		}
		ac = h.amp.classify(req, snap, m.Rcode, false, dep)
		h.amp.observe(&ac)
	}
	// Cached before the reply leaves: the client's next query finds it.
	if cacheable && local && z != nil {
		h.keep(key, z, m, b, cut, &ac, deps)
	}
	if ticket != (dnscache.Ticket{}) && !tcp && ac.c == nil {
		// Kept before the reply leaves, as the zone's: for AnswerWire.
		h.answers.Keep(ticket, h.forwardShape(req.IsEdns0()), b)
	}
	h.write(w, b)
}

// respond builds the reply to req: the message that goes on the wire,
// truncated to what the client can receive. A forwarded reply made from an
// answer of the answer cache that nothing here changed per reply (no
// rewrite, no rotation) comes with the cache's ticket, for Keep. A UDP
// reply made here whose answer was cut to the UDP answer limit says how
// (cut), for the reply cache. rcode is dnsmsg.Check's for req.
func (h *Handler) respond(ctx context.Context, req *dns.Msg, rcode int, tcp bool) (reply *dns.Msg, local bool, deps []string, t dnscache.Ticket, cut *udpCut) {
	asked := req
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	if rcode != dns.RcodeSuccess {
		m.Rcode = rcode
		return dnsmsg.Finish(asked, m, tcp), false, nil, t, nil
	}
	d := h.decideQ(req.Question[0])
	var rev *reversal
	if d.rewrite {
		var err error
		if req, rev, err = h.rewriteRequest(req); err != nil {
			h.log.DebugContext(ctx, "rewrite", "name", asked.Question[0].Name, "err", err)
			m.Rcode = dns.RcodeServerFailure
			return dnsmsg.Finish(asked, m, tcp), false, nil, t, nil
		}
		if rev != nil {
			d = h.decideQ(req.Question[0])
		}
	}
	made := false // answered here, not relayed from upstream: cut to the UDP answer limit
	switch d.route {
	case routeAutopath:
		// Never cached: the answer depends on the search-list option.
		// Candidates outside the zone (host search domains) are each
		// forwarded: together they get one forwarding timeout.
		actx, cancel := context.WithTimeout(ctx, forward.DefaultTimeout)
		fill(m, h.ap.expand(actx, h, req, h.autopathTTL()))
		cancel()
		made = true
	case routeForward:
		if tcp {
			// The client asked over TCP: so does the forwarder.
			ctx = forward.WithClientTCP(ctx)
		}
		if r, rt, err := h.forwardMsg(ctx, req); err == nil {
			m, t = r, rt
		} else {
			// SERVFAIL, or the forwarder's shed rcode (REFUSED).
			m.Rcode = forward.Rcode(err)
		}
	default:
		r := h.resolve(ctx, req.Question[0], d)
		local = !r.Forwarded && !r.volatile
		deps = r.deps
		fill(m, r)
		made = true
	}
	if rev != nil {
		rev.msg(m, asked.Question)
		deps = append(deps, rev.names...)
	}
	if made {
		cut = h.limitUDP(m, tcp)
	}
	if h.lb {
		if r := rotateAnswer(m.Answer, h.lbN.Add(1)); len(r) > 0 && &r[0] != &m.Answer[0] {
			m.Answer, t = r, dnscache.Ticket{}
		}
	}
	if d.rewrite || (h.ap != nil && h.ap.sourceIP) {
		t = dnscache.Ticket{} // AnswerWire would not use it
	}
	return dnsmsg.Finish(asked, m, tcp), local, deps, t, cut
}

// rewriteRequest is req, a query dnsmsg.Check accepts, with its question
// renamed by the rewrites, and how to undo it; req itself and a nil
// reversal when no rule matched.
func (h *Handler) rewriteRequest(req *dns.Msg) (*dns.Msg, *reversal, error) {
	name, rev, err := h.rw.rewrite(req.Question[0].Name)
	if err != nil || rev == nil {
		return req, nil, err
	}
	r := *req
	r.Question = []dns.Question{{Name: name, Qtype: req.Question[0].Qtype, Qclass: req.Question[0].Qclass}}
	return &r, rev, nil
}

// answerBySource answers req from its source address when it is a first
// search query of a known pod (WithAutopathBySource); false otherwise, and
// the normal path answers. dnsmsg.Check has accepted req.
func (h *Handler) answerBySource(ctx context.Context, src net.Addr, req *dns.Msg, tcp bool) (*dns.Msg, bool) {
	var ip netip.Addr
	switch a := src.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	z := h.zone()
	if z == nil || !ip.IsValid() {
		return nil, false
	}
	ns, ok := z.snap.PodNamespace(ip)
	if !ok {
		return nil, false
	}
	q := req.Question[0]
	r, ok := h.ap.bySource(ctx, h, q, ns, z.ttl)
	if !ok {
		return nil, false
	}
	if r.Rcode == dns.RcodeNameError {
		r.Ns = z.negative(lowerFQDN(q.Name))
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	fill(m, r)
	return dnsmsg.Finish(req, m, tcp), true
}

func (h *Handler) write(w dns.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
