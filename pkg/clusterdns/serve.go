package clusterdns

import (
	"context"
	"net"
	"net/netip"
	"sync"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
	"github.com/miekg/dns"
)

// ServeDNS implements dns.Handler. Replies answered from the zone are
// cached in packed form per snapshot (see replyCache), so a repeated
// question costs a map lookup, a copy and a write.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	src := w.RemoteAddr() // once: a writer may build it per call
	_, tcp := src.(*net.TCPAddr)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	opt, rcode := dnsmsg.Check(req)        // once per query
	a := asker{ip: dnsmsg.ClientAddr(src)} // the client: its address and its variant of the name
	ctx := forward.WithClient(context.Background(), a.ip)
	if rcode == dns.RcodeSuccess {
		h.place(&a, req)
		ctx = withVariant(ctx, a.variant)
	}
	var m *dns.Msg // the reply
	var b []byte   // m packed
	if h.ap != nil && h.ap.sourceIP && rcode == dns.RcodeSuccess {
		// A reply that does not pack is left to the normal path.
		if sm, ok := h.answerBySource(ctx, a, req, tcp); ok {
			h.limitUDP(sm, tcp)
			if h.lb {
				sm.Answer = dnsmsg.RotateAnswer(sm.Answer, h.lbN.Add(1))
			}
			if sb, err := sm.PackBuffer((*bp)[:cap(*bp)]); err == nil {
				m, b, *bp = sm, sb, sb
			}
		}
	}
	bySource := m != nil // answered by source: the common tail counts it

	key, cacheable := checkedKey(req, opt, rcode, tcp)
	cacheable = cacheable && !bySource // answers that depend on the source are never cached
	key = variantKey(key, a.variant)
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
	var local bool
	var deps []string
	var ticket dnscache.Ticket
	var cut *udpCut
	if !bySource {
		m, local, deps, ticket, cut = h.respond(ctx, req, rcode, tcp, a.client)
		if a.variant != "" {
			// Retired with the name: its key holds the variant too.
			deps = append(deps, lowerFQDN(req.Question[0].Name))
		}
		var err error
		if b, err = m.PackBuffer((*bp)[:cap(*bp)]); err != nil {
			h.log.Debug("pack reply", "err", err)
			ticket = dnscache.Ticket{}
			m = new(dns.Msg)
			m.SetRcode(req, dns.RcodeServerFailure)
			if b, err = m.PackBuffer((*bp)[:cap(*bp)]); err != nil {
				return
			}
		}
		*bp = b
	}
	// Counted once, before the reply leaves: a client that has its answer
	// sees it in the metrics.
	var ac nsmetrics.Count
	if h.amp != nil {
		snap := h.records.Snapshot()
		if z != nil {
			snap = z.snap // the snapshot of the cached reply
		}
		var dep func(string)
		if cacheable && local {
			dep = func(n string) { deps = append(deps, n) }
		}
		ac = h.amp.Record(req, snap, m.Rcode, bySource, dep)
	}
	// Cached before the reply leaves: the client's next query finds it.
	if cacheable && local && z != nil {
		h.keep(key, z, m, b, cut, &ac, deps)
	}
	if ticket != (dnscache.Ticket{}) && !tcp && !ac.Counted() {
		// Kept before the reply leaves, as the zone's: for AnswerWire.
		h.answers.Keep(ticket, h.forwardShape(req.IsEdns0()), b)
	}
	h.write(w, b)
}

// asker is what an answer needs to know of its client: its address
// (autopath by source), its variant of the question's name ("" but for a
// name with variants), and its place when autopath may expand the query.
type asker struct {
	ip      netip.Addr
	variant store.Variant
	client  topology.Client
}

// place places the client of req (Check accepted it; a.ip is set) once
// per query, and takes the topology option off req: it is never
// forwarded.
func (h *Handler) place(a *asker, req *dns.Msg) {
	var snap *store.Snapshot // set when the answer may have variants
	var lname string
	var named, expands bool
	if z := h.zone(); z != nil && z.snap.Counts.Variants > 0 {
		lname = lowerFQDN(req.Question[0].Name)
		named = z.snap.HasVariants(lname)
		expands = h.ap != nil && (h.ap.sourceIP || inZone(lname, autopath.Suffix))
		if named || expands {
			snap = z.snap
		}
	}
	c := clientTopology(req, h.topoCode, a.ip, snap)
	if named {
		a.variant = snap.VariantFor(lname, c.Zone, c.Node)
	}
	if expands {
		a.client = c
	}
}

// clientTopology is where the client of req is: the option of code
// (removed, malformed or not), else the node and zone of the pod at ip
// (none without snap). Unknown parts are "".
func clientTopology(req *dns.Msg, code uint16, ip netip.Addr, snap *store.Snapshot) topology.Client {
	if code != 0 {
		if c, ok := topology.Take(req, code); ok && c.Known() {
			return c
		}
	}
	if snap == nil || !ip.IsValid() {
		return topology.Client{}
	}
	zone, node := snap.ClientTopology(ip)
	return topology.Client{Zone: zone, Node: node}
}

// respond builds the reply to req: the message that goes on the wire,
// truncated to what the client can receive. A forwarded reply made from an
// answer of the answer cache that nothing here changed per reply (no
// rewrite, no rotation) comes with the cache's ticket, for Keep. A UDP
// reply made here whose answer was cut to the UDP answer limit says how
// (cut), for the reply cache. rcode is dnsmsg.Check's for req.
func (h *Handler) respond(ctx context.Context, req *dns.Msg, rcode int, tcp bool, client topology.Client) (reply *dns.Msg, local bool, deps []string, t dnscache.Ticket, cut *udpCut) {
	m, local, deps, t, cut := h.answerMsg(ctx, req, rcode, tcp, client)
	return dnsmsg.Finish(req, m, tcp), local, deps, t, cut
}

// answerMsg is respond's reply before dnsmsg.Finish: every reply, an
// error's too, is finished in one place.
func (h *Handler) answerMsg(ctx context.Context, req *dns.Msg, rcode int, tcp bool, client topology.Client) (reply *dns.Msg, local bool, deps []string, t dnscache.Ticket, cut *udpCut) {
	asked := req
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	if rcode != dns.RcodeSuccess {
		m.Rcode = rcode
		return m, false, nil, t, nil
	}
	d := h.decideQ(req.Question[0])
	var rev *reversal
	if d.rewrite {
		var err error
		if req, rev, err = h.rewriteRequest(req); err != nil {
			return h.rewriteFailed(ctx, asked, err), false, nil, t, nil
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
		actx, cancel := context.WithTimeout(withCandidateClient(ctx, client), forward.DefaultTimeout)
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
		m.Question = asked.Question // the question as asked
		if err := rev.msg(m); err != nil {
			return h.rewriteFailed(ctx, asked, err), false, nil, dnscache.Ticket{}, nil
		}
		deps = append(deps, rev.names...)
	}
	if made {
		cut = h.limitUDP(m, tcp)
	}
	if h.lb {
		if r := dnsmsg.RotateAnswer(m.Answer, h.lbN.Add(1)); len(r) > 0 && &r[0] != &m.Answer[0] {
			m.Answer, t = r, dnscache.Ticket{}
		}
	}
	if d.rewrite || (h.ap != nil && h.ap.sourceIP) {
		t = dnscache.Ticket{} // AnswerWire would not use it
	}
	return m, local, deps, t, cut
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

// rewriteFailed is asked's SERVFAIL when a rewrite made an invalid name.
func (h *Handler) rewriteFailed(ctx context.Context, asked *dns.Msg, err error) *dns.Msg {
	h.log.DebugContext(ctx, "rewrite", "name", asked.Question[0].Name, "err", err)
	m := new(dns.Msg)
	m.SetRcode(asked, dns.RcodeServerFailure)
	m.RecursionAvailable = h.fwd != nil
	return m
}

// answerBySource answers req, which Check accepted, when it is a first
// search query of a known pod (WithAutopathBySource), each candidate with
// its variant for the client; false otherwise: the normal path answers.
func (h *Handler) answerBySource(ctx context.Context, a asker, req *dns.Msg, tcp bool) (*dns.Msg, bool) {
	z := h.zone()
	if z == nil || !a.ip.IsValid() {
		return nil, false
	}
	ns, ok := z.snap.PodNamespace(a.ip)
	if !ok {
		return nil, false
	}
	q := req.Question[0]
	r, ok := h.ap.bySource(ctx, h, q, ns, a.client, z.ttl)
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

// checkedKey returns the cache key of a request dnsmsg.Check has read (opt
// and rcode are what it returned), and false for requests whose reply is
// not cacheable: responses, and queries Check rejects (not exactly one
// question, not a plain query, EDNS versions other than 0). The size limit
// is dnsmsg.ReplySize, the size Finish truncates to.
func checkedKey(req *dns.Msg, opt *dns.OPT, rcode int, tcp bool) (replycache.Key, bool) {
	if req.Response || rcode != dns.RcodeSuccess {
		return replycache.Key{}, false
	}
	q := req.Question[0]
	k := replycache.Key{Name: q.Name, Qtype: q.Qtype, Qclass: q.Qclass, Limit: uint16(dnsmsg.ReplySize(opt, tcp))}
	if opt != nil {
		k.EDNS, k.DO = true, opt.Do()
	}
	return k, true
}

// variantKey is the reply cache key of a reply made for variant v of the
// question of k: the name and the variant. A variant holds a 0x00 byte
// and ends in an alphanumeric byte; a question name as either path keys
// it ends in '.', so the two never meet.
func variantKey(k replycache.Key, v store.Variant) replycache.Key {
	if v != "" {
		k.Name += string(v)
	}
	return k
}

// cached appends to dst the reply to a request with key k from the reply
// cache, with the request's id and RD and CD bits, and counts it in the
// namespace metrics; false when the cache has no reply for k.
func (h *Handler) cached(dst []byte, k replycache.Key, id uint16, rd, cd bool) ([]byte, bool) {
	r, ok := h.wire.Get(k)
	if !ok {
		return dst, false
	}
	b := r.AppendTo(dst, id, rd, cd)
	if r.amp.Counted() {
		// Counted before the reply leaves: a client that has its answer
		// sees it in the metrics.
		h.amp.Observe(r.amp)
	}
	return b, true
}

// keep puts m, a reply made from z and packed as b, in the reply cache
// under k. deps are the names besides the question's it was made from;
// cut is how its answer was cut (nil: not cut); ac is what it added to
// the namespace metrics. Only NOERROR and NXDOMAIN replies are kept.
func (h *Handler) keep(k replycache.Key, z *zone, m *dns.Msg, b []byte, cut *udpCut, ac *nsmetrics.Count, deps []string) {
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return
	}
	r := &reply{amp: *ac}
	if cut != nil {
		// Kept whole, to hand out the next window on each hit.
		w, ok := h.windowReply(m, cut, int(k.Limit))
		if !ok {
			return
		}
		r.Reply = w
	} else {
		r.Reply = replycache.NewReply(append([]byte(nil), b...), h.lb)
	}
	h.wire.Put(k, r, r.Len(), z.epoch, append(deps, lowerFQDN(k.Name)))
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

func (h *Handler) write(w dns.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// route is how a question is answered.
type route uint8

const (
	routeRefused     route = iota // REFUSED: a zone transfer, a class other than IN or ANY, no forwarder
	routeServfail                 // SERVFAIL: a zone or reverse name before the first sync
	routeZone                     // from the snapshot
	routeReverseAuth              // an authoritative reverse name the snapshot does not know
	routeStatic                   // from the Static records
	routeAutopath                 // a name under the autopath suffix: the search list is tried here
	routeForward                  // upstream (ANY too, as CoreDNS's forward)
)

// decision is how one question is answered. decide makes it; every path
// (ServeDNS, Resolve and the wire paths) asks decide.
type decision struct {
	route route
	z     *zone        // the current zone view; nil before the first sync
	rrs   []dns.RR     // routeStatic: the static records of the asked type
	ra    *reverseAuth // routeReverseAuth: the reverse zone
	// rewrite: rewrites are configured, so the name may be renamed
	// before it is answered. Only ServeDNS renames; the wire paths leave
	// such a query to it.
	rewrite bool
}

// refused is the rule for what is never answered: a class other than IN
// or ANY, and a zone transfer (never a zone listing, whatever the name).
func refused(qtype, qclass uint16) bool {
	return (qclass != dns.ClassINET && qclass != dns.ClassANY) ||
		qtype == dns.TypeAXFR || qtype == dns.TypeIXFR
}

// decide decides how a question of qtype and qclass for lname, its name
// in lowercase (text, or bytes on the wire paths), is answered. It is the
// only place that does.
func decide[S ~string | ~[]byte](h *Handler, qtype, qclass uint16, lname S) decision {
	if refused(qtype, qclass) {
		return decision{route: routeRefused}
	}
	if h.ap != nil && inZone(lname, autopath.Suffix) {
		// Never renamed: autopath renames each candidate instead.
		return decision{route: routeAutopath}
	}
	d := decision{rewrite: h.rw != nil}
	if inZone(lname, h.zoneName) {
		if delegated(h, lname) {
			return h.forwarded(d)
		}
		if d.z = h.zone(); d.z == nil {
			d.route = routeServfail
			return d
		}
		d.route = routeZone
		return d
	}
	reverse := inZone(lname, reverse4) || inZone(lname, reverse6)
	if reverse {
		if d.z = h.zone(); d.z == nil {
			d.route = routeServfail
			return d
		}
		if _, ok := d.z.snap.Lookup(string(lname)); ok {
			d.route = routeZone
			return d
		}
	}
	if h.static != nil {
		if rrs, found := h.static.Lookup(string(lname), qtype); found {
			d.route, d.rrs = routeStatic, rrs
			return d
		}
	}
	if reverse {
		if d.ra = h.reverseAuthFor(string(lname)); d.ra != nil {
			d.route = routeReverseAuth
			return d
		}
		if h.fwd == nil {
			d.route = routeZone
			return d
		}
	}
	// ANY for a name of no zone of ours is forwarded, as CoreDNS's forward
	// does without the any plugin (kubeadm's Corefile has none): the
	// upstream knows whether the name exists, and its RFC 8482 answer is
	// bounded like any other by the UDP reply size.
	return h.forwarded(d)
}

// forwarded is d forwarded, or refused without a forwarder.
func (h *Handler) forwarded(d decision) decision {
	d.route = routeForward
	if h.fwd == nil {
		d.route = routeRefused
	}
	return d
}

// decideQ is decide for a question as asked.
func (h *Handler) decideQ(q dns.Question) decision {
	return decide(h, q.Qtype, q.Qclass, lowerFQDN(q.Name))
}

// resolve answers q as d says. A name under the autopath suffix is
// answered as any other here: autopath itself asks per candidate.
func (h *Handler) resolve(ctx context.Context, q dns.Question, d decision) Result {
	lname := lowerFQDN(q.Name)
	owner := q.Name
	if !dns.IsFqdn(owner) {
		owner += "."
	}
	switch d.route {
	case routeRefused:
		return Result{Rcode: dns.RcodeRefused}
	case routeServfail:
		return Result{Rcode: dns.RcodeServerFailure}
	case routeZone:
		return h.answer(ctx, d.z, q.Qtype, owner, lname, 0)
	case routeReverseAuth:
		return d.z.reverseAnswer(d.ra, q.Qtype, owner, lname)
	case routeStatic:
		return staticAnswer(q.Qtype, owner, lname, d.rrs)
	}
	return h.forwardQuestion(ctx, q)
}

// delegated reports whether lname, a name of the cluster zone, is under
// a delegated zone.
func delegated[S ~string | ~[]byte](h *Handler, lname S) bool {
	if h.fwd == nil {
		return false
	}
	for _, z := range h.delegated {
		if z != h.zoneName && inZone(lname, z) {
			return true
		}
	}
	return false
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
