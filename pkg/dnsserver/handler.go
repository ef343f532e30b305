package dnsserver

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver/store"
)

// Records is what the handler reads: the current snapshot of the record
// store, nil until the first full sync. *store.Store implements it.
type Records interface {
	Snapshot() *store.Snapshot
}

// Exchanger sends a query upstream and returns the reply. *Forwarder
// implements it.
type Exchanger interface {
	Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
}

// Result is the outcome of resolving one question, before it is put on the
// wire. Callers must not modify the records (some, like the zone SOA, are
// shared); appending to the slices copies (they are clipped).
type Result struct {
	Rcode         int
	Answer        []dns.RR
	Ns            []dns.RR
	Extra         []dns.RR
	Authoritative bool
	// Forwarded is true when the answer came from an upstream server, in
	// whole or in part (an ExternalName outside the zone), or when asking
	// one failed: such answers are not cached.
	Forwarded bool
}

// Handler answers queries for the cluster zone from Records and forwards
// the others. It implements dns.Handler.
type Handler struct {
	zoneName string
	records  Records
	fwd      Exchanger
	log      *slog.Logger
	metrics  *Metrics
	ap       *autopathExpander // nil: autopath off

	mu  sync.Mutex
	cur atomic.Pointer[zone]
}

var _ dns.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option func(*Handler)

// WithForwarder sets where names outside the cluster zone and unknown
// reverse names go. Without it they are answered REFUSED (and unknown
// reverse names NXDOMAIN).
func WithForwarder(e Exchanger) Option { return func(h *Handler) { h.fwd = e } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithMetrics sets the metrics the handler records into.
func WithMetrics(m *Metrics) Option { return func(h *Handler) { h.metrics = m } }

// NewHandler returns a Handler for the cluster zone (e.g. "cluster.local")
// reading records from r.
func NewHandler(zoneName string, r Records, opts ...Option) *Handler {
	h := &Handler{zoneName: lowerFQDN(zoneName), records: r}
	for _, o := range opts {
		o(h)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// maxChase bounds CNAME chains followed inside the zone.
const maxChase = 8

// lowerFQDN returns name in lowercase with a trailing dot, without
// allocating when it already is.
func lowerFQDN(name string) string {
	clean := len(name) > 0 && name[len(name)-1] == '.'
	if clean {
		for i := 0; i < len(name); i++ {
			if c := name[i]; 'A' <= c && c <= 'Z' {
				clean = false
				break
			}
		}
	}
	if clean {
		return name
	}
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// Synced reports whether the records have had their first full sync.
func (h *Handler) Synced() bool { return h.records.Snapshot() != nil }

// zone returns the zone view of the current snapshot, making it on first
// use (a new snapshot starts with an empty reply cache).
func (h *Handler) zone() *zone {
	snap := h.records.Snapshot()
	if snap == nil {
		return nil
	}
	if z := h.cur.Load(); z != nil && z.snap == snap {
		return z
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if z := h.cur.Load(); z != nil && z.snap == snap {
		return z
	}
	z := newZone(snap)
	h.cur.Store(z)
	return z
}

// Warm makes the zone view of the current snapshot now.
func (h *Handler) Warm() { h.zone() }

// Resolve answers one question without writing to the wire: from the cluster
// zone, from the reverse records of the store, or from upstream. It is the
// core the wire handler wraps (and what autopath calls per search suffix).
func (h *Handler) Resolve(ctx context.Context, q dns.Question) Result {
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return Result{Rcode: dns.RcodeRefused}
	}
	lname := lowerFQDN(q.Name)
	owner := q.Name
	if !dns.IsFqdn(owner) {
		owner += "."
	}
	if inZone(lname, h.zoneName) {
		z := h.zone()
		if z == nil {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		return h.answer(ctx, z, q.Qtype, owner, lname, 0)
	}
	if reverseZone(lname) != "" {
		z := h.zone()
		if z == nil {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		if _, ok := z.snap.Lookup(lname); ok || h.fwd == nil {
			return h.answer(ctx, z, q.Qtype, owner, lname, 0)
		}
	}
	return h.forwardQuestion(ctx, q)
}

// local reports whether the question is answered by this server rather than
// forwarded.
func (h *Handler) local(q dns.Question) bool {
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return true
	}
	lname := lowerFQDN(q.Name)
	if inZone(lname, h.zoneName) {
		return true
	}
	if reverseZone(lname) != "" {
		z := h.zone()
		if z == nil || h.fwd == nil {
			return true
		}
		_, ok := z.snap.Lookup(lname)
		return ok
	}
	return h.fwd == nil
}

func (z *zone) negative(name string) []dns.RR {
	if rz := reverseZone(name); rz != "" {
		return []dns.RR{soaRR(rz, z.name, z.ttl, z.snap.Serial)}
	}
	return z.soa
}

// answer answers from the zone. owner is the name as asked (its case is
// echoed), lname its lowercase form.
func (h *Handler) answer(ctx context.Context, z *zone, qtype uint16, owner, lname string, depth int) Result {
	n, ok := z.snap.Lookup(lname)
	if !ok {
		if r, ok := h.insecurePod(z, qtype, owner, lname); ok {
			return r
		}
		return Result{Rcode: dns.RcodeNameError, Ns: z.negative(lname), Authoritative: true}
	}
	if n.CNAME != "" && qtype != dns.TypeCNAME && qtype != dns.TypeANY {
		return h.chase(ctx, z, qtype, cnameRR(owner, n.CNAME, n.TTL), n.CNAME, depth)
	}
	ans := z.records(owner, lname, n, qtype)
	if len(ans) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true}
	}
	var extra []dns.RR
	if qtype == dns.TypeSRV {
		extra = z.srvExtra(n.SRV)
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Extra: clip(extra), Authoritative: true}
}

// chase answers for an ExternalName: the CNAME, then the target's records,
// followed inside the zone or asked upstream.
func (h *Handler) chase(ctx context.Context, z *zone, qtype uint16, cname dns.RR, target string, depth int) Result {
	if inZone(target, z.name) {
		if depth >= maxChase {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		r := h.answer(ctx, z, qtype, target, target, depth+1)
		if r.Rcode == dns.RcodeServerFailure {
			return r
		}
		r.Answer = append([]dns.RR{cname}, r.Answer...)
		return r
	}
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true}
	}
	r := h.forwardQuestion(ctx, dns.Question{Name: target, Qtype: qtype, Qclass: dns.ClassINET})
	if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
		// The client can still chase the CNAME itself.
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{cname}, Authoritative: true, Forwarded: true}
	}
	r.Answer = append([]dns.RR{cname}, r.Answer...)
	r.Forwarded = true
	return r
}

// insecurePod answers <dashed-ip>.<ns>.pod.<zone> in the insecure pod mode:
// any well-formed IP in an exposed namespace.
func (h *Handler) insecurePod(z *zone, qtype uint16, owner, lname string) (Result, bool) {
	if z.snap.Options.Pods != store.PodsInsecure {
		return Result{}, false
	}
	suffix := ".pod." + z.name
	if !strings.HasSuffix(lname, suffix) {
		return Result{}, false
	}
	rest := lname[:len(lname)-len(suffix)]
	i := strings.IndexByte(rest, '.')
	if i <= 0 || strings.IndexByte(rest[i+1:], '.') >= 0 {
		return Result{}, false
	}
	if !z.snap.NamespaceExposed(rest[i+1:]) {
		return Result{}, false
	}
	ip, ok := store.ParseDashedIP(rest[:i])
	if !ok {
		return Result{}, false
	}
	if (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6()) || qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{addrRR(owner, ip, z.ttl)}, Authoritative: true}, true
	}
	return Result{Rcode: dns.RcodeSuccess, Ns: z.soa, Authoritative: true}, true
}

func (h *Handler) forwardQuestion(ctx context.Context, q dns.Question) Result {
	if h.fwd == nil {
		return Result{Rcode: dns.RcodeRefused}
	}
	r, err := h.fwd.Exchange(ctx, dnsmsg.Query(q, false))
	if err != nil {
		h.log.DebugContext(ctx, "forward failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return Result{Rcode: dns.RcodeServerFailure, Forwarded: true}
	}
	return Result{Rcode: r.Rcode, Answer: clip(r.Answer), Ns: clip(r.Ns), Extra: clip(dnsmsg.WithoutOPT(r.Extra)), Forwarded: true}
}

// ServeDNS implements dns.Handler. Replies answered from the zone are
// cached in packed form per snapshot (see wireCache), so a repeated
// question costs a map lookup, a copy and a write.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	var qtype uint16
	if len(req.Question) > 0 {
		qtype = req.Question[0].Qtype
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if h.ap != nil && h.ap.sourceIP {
		// Answers that depend on the source are never cached.
		if m, ok := h.ap.answerBySource(context.Background(), h, w.RemoteAddr(), req, tcp); ok {
			if b, err := m.PackBuffer((*bp)[:cap(*bp)]); err == nil {
				*bp = b
				h.metrics.observe(qtype, m.Rcode, time.Since(start))
				h.write(w, b)
				return
			}
		}
	}

	key, cacheable := cacheKeyOf(req, tcp)
	var z *zone
	if cacheable {
		z = h.zone()
		if z != nil {
			if e, ok := z.wire.get(key); ok {
				b := append((*bp)[:0], e.wire...)
				b[0], b[1] = byte(req.Id>>8), byte(req.Id)
				if req.RecursionDesired {
					b[2] |= 0x01
				}
				if req.CheckingDisabled {
					b[3] |= 0x10
				}
				*bp = b
				h.metrics.observe(qtype, e.rcode, time.Since(start))
				h.write(w, b)
				return
			}
		}
	}
	m, local := h.respond(context.Background(), req, tcp)
	b, err := m.PackBuffer((*bp)[:cap(*bp)])
	if err != nil {
		h.log.Debug("pack reply", "err", err)
		m = new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		if b, err = m.PackBuffer((*bp)[:cap(*bp)]); err != nil {
			return
		}
	}
	*bp = b
	// Counted before the reply leaves: a client holding its answer finds
	// the query in the metrics.
	h.metrics.observe(qtype, m.Rcode, time.Since(start))
	h.write(w, b)
	if cacheable && local && z != nil && z == h.cur.Load() && (m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError) {
		// The cached form has RD and CD clear; they are set per request.
		c := append([]byte(nil), b...)
		c[2] &^= 0x01
		c[3] &^= 0x10
		z.wire.put(key, wireEntry{wire: c, rcode: m.Rcode})
	}
}

func (h *Handler) write(w dns.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// respond builds the reply to req: the message that goes on the wire,
// truncated to what the client can receive.
func (h *Handler) respond(ctx context.Context, req *dns.Msg, tcp bool) (reply *dns.Msg, local bool) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	switch _, rcode := dnsmsg.Check(req); {
	case rcode != dns.RcodeSuccess:
		m.Rcode = rcode
	case h.ap != nil && h.ap.owns(req.Question[0].Name):
		// Never cached: the answer depends on the search-list option.
		// Candidates outside the zone (host search domains) are each
		// forwarded: together they get one forwarding timeout.
		actx, cancel := context.WithTimeout(ctx, DefaultForwardTimeout)
		fill(m, h.ap.expand(actx, h, req))
		cancel()
	case !h.local(req.Question[0]):
		if r, ok := h.forwardMsg(ctx, req); ok {
			m = r
		} else {
			m.Rcode = dns.RcodeServerFailure
		}
	default:
		r := h.Resolve(ctx, req.Question[0])
		local = !r.Forwarded
		fill(m, r)
	}
	return dnsmsg.Finish(req, m, tcp), local
}

// fill puts a Result into a reply.
func fill(m *dns.Msg, r Result) {
	m.Rcode = r.Rcode
	m.Authoritative = r.Authoritative
	m.Answer, m.Ns, m.Extra = r.Answer, r.Ns, r.Extra
}

// forwardMsg relays the client's query upstream as it is (keeping its EDNS0
// options and DO bit) and returns the reply, ready for our OPT.
func (h *Handler) forwardMsg(ctx context.Context, req *dns.Msg) (*dns.Msg, bool) {
	if h.fwd == nil {
		return nil, false
	}
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
	r, err := h.fwd.Exchange(ctx, up)
	if err != nil {
		q := req.Question[0]
		h.log.DebugContext(ctx, "forward failed", "name", q.Name, "type", dns.TypeToString[q.Qtype], "err", err)
		return nil, false
	}
	r.Id = req.Id
	r.Question = req.Question
	r.Extra = dnsmsg.WithoutOPT(r.Extra)
	r.RecursionAvailable = true
	r.Compress = true
	return r, true
}
