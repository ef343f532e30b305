package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/autopath"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
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
	// volatile answers (static records) are not cached either: their
	// source changes without a new snapshot.
	volatile bool
	// deps are the lowercase names besides the question's that the answer
	// was made from (SRV targets, CNAME targets in the zone): a cached
	// reply is retired when any of them changes.
	deps []string
}

// Static is a source of static records for names outside the cluster zone
// (an /etc/hosts file, per-name overrides). Lookup gets a lowercase fully
// qualified name and returns its records of type qtype; found reports
// whether the name has static records at all (of any type). It must be safe
// for concurrent use and must not modify the returned records afterwards
// (the handler does not modify them either).
type Static interface {
	Lookup(name string, qtype uint16) (rrs []dns.RR, found bool)
}

// Handler answers queries for the cluster zone from Records and forwards
// the others. It implements dns.Handler.
type Handler struct {
	zoneName string
	records  Records
	fwd      Exchanger
	log      *slog.Logger
	ap       *autopathExpander // nil: autopath off
	static   Static
	// delegated are zones inside the cluster zone whose names are
	// forwarded, not answered from the zone.
	delegated []string
	reverse   []reverseAuth  // reverse zones answered authoritatively
	lb        bool           // rotate A, AAAA and SRV RRsets per reply
	lbN       atomic.Uint32  // replies rotated on the miss path
	udpLimit  int            // A or AAAA records in a UDP reply; 0: all
	cutN      atomic.Uint32  // replies cut to udpLimit on the miss path
	amp       *Amplification // nil: no namespace metrics
	// wireMisses answers the zone's NXDOMAINs and one-address replies
	// from the wire (missWire).
	wireMisses bool
	rw         *rewriter // nil: no rewrites
	// wire caches packed replies across snapshots.
	wire wireCache

	mu  sync.Mutex // serialises moving on to a new snapshot
	cur atomic.Pointer[zone]
}

var (
	_ dns.Handler            = (*Handler)(nil)
	_ dnsserver.WireAnswerer = (*Handler)(nil)
)

// Option configures a Handler.
type Option func(*Handler)

// WithForwarder sets where names outside the cluster zone and unknown
// reverse names go. Without it they are answered REFUSED (and unknown
// reverse names NXDOMAIN).
func WithForwarder(e Exchanger) Option { return func(h *Handler) { h.fwd = e } }

// WithDelegations forwards the names of zones inside the cluster zone
// (forward routes such as "paris.svc.cluster.local") instead of answering
// them from the zone, as CoreDNS does with a server block for that zone.
// Zones not inside the cluster zone are ignored; it needs WithForwarder.
func WithDelegations(zones []string) Option {
	return func(h *Handler) {
		for _, z := range zones {
			h.delegated = append(h.delegated, lowerFQDN(z))
		}
	}
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

// WithReplyCache bounds the packed replies cached at bytes (default
// DefaultReplyCacheBytes; 0 keeps the default). The replies in use stay
// while a flood of one-off names churns the rest, and a new snapshot
// retires only the replies made from names that changed (see wireCache).
func WithReplyCache(bytes int64) Option {
	return func(h *Handler) {
		if bytes > 0 {
			h.wire.max = bytes
		}
	}
}

// WithWireMisses answers from its wire form (AnswerWire), without
// unpacking it, a UDP query the reply cache misses for a name of the zone
// that does not exist (NXDOMAIN with the zone's SOA) or that has exactly
// one address of the asked type, A or AAAA: the bytes ServeDNS sends
// (missWire). Off by default; serve turns it on.
func WithWireMisses() Option { return func(h *Handler) { h.wireMisses = true } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithLoadBalance rotates the order of A and AAAA RRsets, and of SRV
// records of equal priority, in the answer section of every reply (off by
// default; the command turns it on, as kubeadm's Corefile "loadbalance").
// Cached replies are rotated in their packed form, one step per hit.
func WithLoadBalance(on bool) Option { return func(h *Handler) { h.lb = on } }

// WithStatic answers names outside the cluster zone that s has records for
// (found), before forwarding, authoritatively and without caching: NOERROR
// with s's records of the asked type, NOERROR with no answer and no SOA
// when it has none of that type (the name is in no zone of this server), a
// synthesized HINFO for ANY. Names inside the cluster zone come from the
// zone only; reverse names the snapshot knows come from the snapshot first.
func WithStatic(s Static) Option { return func(h *Handler) { h.static = s } }

// reverseAuth is a prefix whose reverse names the handler answers
// authoritatively, and the reverse zone that holds it.
type reverseAuth struct {
	prefix netip.Prefix // masked
	bits   int          // the zone cut: prefix.Bits() rounded down to an octet (IPv4) or a nibble (IPv6)
	zone   string       // the zone's name, e.g. "10.in-addr.arpa."
}

// WithReverseZones makes the handler authoritative for the reverse names
// inside prefixes (the Service and Pod CIDRs): a reverse name inside one
// that the snapshot does not know is NXDOMAIN (NOERROR with no answer when
// addresses of the snapshot lie below it), with the SOA of the smallest
// octet-aligned (IPv4) or nibble-aligned (IPv6) reverse zone containing the
// prefix, instead of being forwarded. The names from that zone's apex down
// to the prefix exist (the apex answers SOA and NS). Other reverse names
// keep being forwarded. Invalid prefixes and IPv4-mapped IPv6 prefixes are
// an error.
func WithReverseZones(prefixes []netip.Prefix) (Option, error) {
	var auth []reverseAuth
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("reverse zone prefix %q: not a valid prefix", p.String())
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("reverse zone prefix %q: IPv4-mapped, use the IPv4 form", p.String())
		}
		p = p.Masked()
		step := 8
		if p.Addr().Is6() {
			step = 4
		}
		bits := p.Bits() / step * step
		zp := netip.PrefixFrom(p.Addr(), bits).Masked()
		auth = append(auth, reverseAuth{prefix: p, bits: bits, zone: reverseZoneName(zp)})
	}
	return func(h *Handler) { h.reverse = auth }, nil
}

// NewHandler returns a Handler for the cluster zone (e.g. "cluster.local")
// reading records from r.
func NewHandler(zoneName string, r Records, opts ...Option) *Handler {
	h := &Handler{zoneName: lowerFQDN(zoneName), records: r}
	h.wire.max, h.wire.idle = DefaultReplyCacheBytes, replyIdle
	for _, o := range opts {
		o(h)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.ap != nil {
		h.ap.log = h.log
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
// use: the reply cache then retires the replies made from names that
// changed since the view before.
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
	prev := h.cur.Load()
	if prev != nil && prev.snap == snap {
		return prev
	}
	z := newZone(snap, &h.wire)
	var prevSnap *store.Snapshot
	if prev != nil {
		prevSnap = prev.snap
	}
	h.wire.advance(prevSnap, snap, h.apexes(z))
	h.cur.Store(z)
	return z
}

// apexes are the names whose replies carry the SOA serial as an answer:
// the zone's and the authoritative reverse zones' apexes. Their cached
// replies are retired at every snapshot; negative replies keep the serial
// they were made with, as a caching resolver would.
func (h *Handler) apexes(z *zone) []string {
	out := []string{z.name}
	for _, ra := range h.reverse {
		out = append(out, ra.zone)
	}
	return out
}

// Warm makes the zone view of the current snapshot now.
func (h *Handler) Warm() { h.zone() }

// How a question is answered (Handler.route).
const (
	routeRefused     = iota // REFUSED: a class other than IN or ANY, a zone transfer
	routeServfail           // SERVFAIL: zone or reverse name before the first sync
	routeZone               // from the snapshot
	routeReverseAuth        // an authoritative reverse name the snapshot does not know
	routeStatic             // from the Static records
	routeForward            // upstream (ANY too, as CoreDNS's forward)
)

// route decides how q is answered. lname is q.Name lowercase; z is the
// current zone view (nil before the first sync); rrs are the static records
// for routeStatic, ra the reverse zone for routeReverseAuth.
func (h *Handler) route(q dns.Question, lname string) (kind int, z *zone, rrs []dns.RR, ra *reverseAuth) {
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return routeRefused, nil, nil, nil
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		// Never a zone listing, whatever the name.
		return routeRefused, nil, nil, nil
	}
	if inZone(lname, h.zoneName) {
		if delegated(h, lname) {
			return routeForward, nil, nil, nil
		}
		if z = h.zone(); z == nil {
			return routeServfail, nil, nil, nil
		}
		return routeZone, z, nil, nil
	}
	reverse := reverseZone(lname) != ""
	if reverse {
		if z = h.zone(); z == nil {
			return routeServfail, nil, nil, nil
		}
		if _, ok := z.snap.Lookup(lname); ok {
			return routeZone, z, nil, nil
		}
	}
	if h.static != nil {
		if rrs, found := h.static.Lookup(lname, q.Qtype); found {
			return routeStatic, z, rrs, nil
		}
	}
	if reverse {
		if ra := h.reverseAuthFor(lname); ra != nil {
			return routeReverseAuth, z, nil, ra
		}
		if h.fwd == nil {
			return routeZone, z, nil, nil
		}
	}
	// ANY for a name of no zone of ours is forwarded, as CoreDNS's forward
	// does without the any plugin (kubeadm's Corefile has none): the
	// upstream knows whether the name exists, and its RFC 8482 answer is
	// bounded like any other by the UDP reply size.
	return routeForward, z, nil, nil
}

// Resolve answers one question without writing to the wire: from the cluster
// zone, from the reverse records of the store, from the static records, or
// from upstream. It is the core the wire handler wraps (and what autopath
// calls per search suffix).
func (h *Handler) Resolve(ctx context.Context, q dns.Question) Result {
	lname := lowerFQDN(q.Name)
	owner := q.Name
	if !dns.IsFqdn(owner) {
		owner += "."
	}
	kind, z, rrs, ra := h.route(q, lname)
	switch kind {
	case routeRefused:
		return Result{Rcode: dns.RcodeRefused}
	case routeServfail:
		return Result{Rcode: dns.RcodeServerFailure}
	case routeZone:
		return h.answer(ctx, z, q.Qtype, owner, lname, 0)
	case routeReverseAuth:
		return z.reverseAnswer(ra, q.Qtype, owner, lname)
	case routeStatic:
		return staticAnswer(q.Qtype, owner, lname, rrs)
	}
	return h.forwardQuestion(ctx, q)
}

// local reports whether the question is answered by this server rather than
// forwarded.
func (h *Handler) local(q dns.Question) bool {
	kind, _, _, _ := h.route(q, lowerFQDN(q.Name))
	return kind != routeForward
}

// anyRR is the minimal answer to ANY for an existing name (RFC 8482): the
// CNAME of an alias, else a synthesized HINFO "RFC8482" "".
func anyRR(owner, cname string, ttl uint32) dns.RR {
	if cname != "" {
		return cnameRR(owner, cname, ttl)
	}
	return &dns.HINFO{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: ttl}, Cpu: "RFC8482"}
}

// staticAnswer answers from static records: authoritative, never cached,
// the owners in the question's case.
func staticAnswer(qtype uint16, owner, lname string, rrs []dns.RR) Result {
	r := Result{Rcode: dns.RcodeSuccess, Authoritative: true, volatile: true}
	if qtype == dns.TypeANY {
		var ttl uint32
		if len(rrs) > 0 {
			ttl = rrs[0].Header().Ttl
		}
		r.Answer = []dns.RR{anyRR(owner, "", ttl)}
		return r
	}
	if owner == lname {
		r.Answer = clip(rrs)
		return r
	}
	r.Answer = make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name == lname {
			rr = dns.Copy(rr)
			rr.Header().Name = owner
		}
		r.Answer[i] = rr
	}
	return r
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
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, n.CNAME(), n.TTL)}, Authoritative: true}
	}
	if n.CNAME() != "" && qtype != dns.TypeCNAME {
		return h.chase(ctx, z, qtype, cnameRR(owner, n.CNAME(), n.TTL), n.CNAME(), depth)
	}
	ans := z.records(owner, lname, n, qtype)
	if len(ans) == 0 {
		return Result{Rcode: dns.RcodeSuccess, Ns: z.negative(lname), Authoritative: true}
	}
	var extra []dns.RR
	var deps []string
	if qtype == dns.TypeSRV {
		extra = z.srvExtra(n.SRV())
		for _, s := range n.SRV() {
			deps = append(deps, s.Target)
		}
	}
	return Result{Rcode: dns.RcodeSuccess, Answer: clip(ans), Extra: clip(extra), Authoritative: true, deps: deps}
}

// chase answers for an ExternalName: the CNAME, then the target's records,
// followed inside the zone or asked upstream.
func (h *Handler) chase(ctx context.Context, z *zone, qtype uint16, cname dns.RR, target string, depth int) Result {
	if inZone(target, z.name) && !delegated(h, target) {
		if depth >= maxChase {
			return Result{Rcode: dns.RcodeServerFailure}
		}
		r := h.answer(ctx, z, qtype, target, target, depth+1)
		if r.Rcode == dns.RcodeServerFailure {
			return r
		}
		r.Answer = append([]dns.RR{cname}, r.Answer...)
		r.deps = append(r.deps, target)
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
	if qtype == dns.TypeANY {
		return Result{Rcode: dns.RcodeSuccess, Answer: []dns.RR{anyRR(owner, "", z.ttl)}, Authoritative: true}, true
	}
	if (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6()) {
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
		return Result{Rcode: forward.Rcode(err), Forwarded: true}
	}
	return Result{Rcode: r.Rcode, Answer: clip(r.Answer), Ns: clip(r.Ns), Extra: clip(dnsmsg.WithoutOPT(r.Extra)), Forwarded: true}
}

// ServeDNS implements dns.Handler. Replies answered from the zone are
// cached in packed form per snapshot (see wireCache), so a repeated
// question costs a map lookup, a copy and a write.
func (h *Handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if h.ap != nil && h.ap.sourceIP {
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

	key, cacheable := cacheKeyOf(req, tcp)
	var z *zone
	if cacheable {
		z = h.zone()
		if z != nil {
			if b, ok := h.cached((*bp)[:0], z, key, req.Id, req.RecursionDesired, req.CheckingDisabled); ok {
				*bp = b
				h.write(w, b)
				return
			}
		}
	}
	m, local, deps, ticket, cut := h.respond(context.Background(), req, tcp)
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
	if cacheable && local && z != nil && (m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError) {
		e := wireEntry{rcode: m.Rcode}
		if cut != nil {
			// Kept whole, to hand out the next window on each hit.
			e.wire, e.win = h.windowReply(m, cut, int(key.limit))
		} else {
			// The cached form has RD and CD clear; they are set per request.
			e.wire = append([]byte(nil), b...)
			e.wire[2] &^= 0x01
			e.wire[3] &^= 0x10
			if h.lb {
				e.lb = planRotation(e.wire)
			}
		}
		if ac.c != nil {
			e.amp = new(ampCount)
			*e.amp = ac
		}
		if e.wire != nil {
			h.wire.put(key, e, z.snap, append(deps, lowerFQDN(key.name)))
		}
	}
	if ticket != (dnscache.Ticket{}) && !tcp && ac.c == nil {
		// Kept before the reply leaves, as the zone's: for AnswerWire.
		h.fwd.(*dnscache.Cache).Keep(ticket, h.forwardShape(req.IsEdns0()), b)
	}
	h.write(w, b)
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

// resolveCandidate implements candidateResolver, autopath's one door to the
// zone: Resolve, or with localOnly only what asks no upstream.
// Each candidate is rewritten as the client's own question for it would
// be: autopath gives the answer the client's search would.
func (h *Handler) resolveCandidate(ctx context.Context, q dns.Question, localOnly bool) (Result, bool) {
	var rev *reversal
	if h.rw != nil {
		name, rv, err := h.rw.rewrite(q.Name)
		if err != nil {
			h.log.DebugContext(ctx, "rewrite", "name", q.Name, "err", err)
			return Result{Rcode: dns.RcodeServerFailure}, false
		}
		if rv != nil {
			q.Name, rev = name, rv
		}
	}
	if localOnly && h.costsUpstream(h.zone(), q) {
		return Result{}, true
	}
	r := h.Resolve(ctx, q)
	if rev != nil {
		r = rev.result(r)
	}
	return r, false
}

// costsUpstream reports whether resolving q asks an upstream: a name the
// handler forwards, or a zone name whose CNAME chain (ExternalName) leaves
// the zone (Resolve's chase). z is the current zone view (nil before the
// first sync).
func (h *Handler) costsUpstream(z *zone, q dns.Question) bool {
	if h.fwd == nil {
		return false
	}
	if !h.local(q) {
		return true
	}
	if z == nil || q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeANY {
		return false
	}
	name := lowerFQDN(q.Name)
	for range maxChase + 1 {
		n, ok := z.snap.Lookup(name)
		if !ok || n.CNAME() == "" {
			return false
		}
		if !inZone(n.CNAME(), z.name) || delegated(h, n.CNAME()) {
			return true
		}
		name = n.CNAME()
	}
	return false
}

// autopathTTL is the TTL of autopath's CNAME and SOA: the zone's, or 5 s
// before the first sync.
func (h *Handler) autopathTTL() uint32 {
	if z := h.zone(); z != nil {
		return z.ttl
	}
	return 5
}

// answerBySource answers req from its source address when it is a first
// search query of a known pod (WithAutopathBySource); false otherwise, and
// the normal path answers.
func (h *Handler) answerBySource(ctx context.Context, src net.Addr, req *dns.Msg, tcp bool) (*dns.Msg, bool) {
	if _, rcode := dnsmsg.Check(req); rcode != dns.RcodeSuccess {
		return nil, false
	}
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

// cached appends to dst the reply to a request with key k from z's reply
// cache, with the request's id and RD and CD bits, and counts it in the
// namespace metrics; false when z has no reply for k.
func (h *Handler) cached(dst []byte, z *zone, k cacheKey, id uint16, rd, cd bool) ([]byte, bool) {
	e, ok := h.wire.get(k)
	if !ok {
		return dst, false
	}
	var b []byte
	switch {
	case e.win != nil:
		b = e.win.apply(dst[:0], e.wire)
	case e.lb != nil:
		b = e.lb.apply(dst[:0], e.wire)
	default:
		b = append(dst[:0], e.wire...)
	}
	b[0], b[1] = byte(id>>8), byte(id)
	if rd {
		b[2] |= 0x01
	}
	if cd {
		b[3] |= 0x10
	}
	if e.amp != nil {
		// Counted before the reply leaves: a client that has its answer
		// sees it in the metrics.
		h.amp.observe(e.amp)
	}
	return b, true
}

// AnswerWire implements dnsserver.WireAnswerer: a UDP query whose reply is in the
// current snapshot's reply cache is answered from its wire form, on the
// socket's reading goroutine, without being unpacked. Its key
// (wireKey) is cacheKeyOf's for the same query, so the reply is the
// one ServeDNS would send. So is a query that ServeDNS would forward and
// whose answer the answer cache holds with the finished reply ServeDNS kept
// for its shape (forwardedWire), and, WithWireMisses, a query for a name
// of the zone that does not exist or has one address of the asked type
// (missWire). Everything else (a miss, a query
// ParseQuery leaves to miekg/dns, and every query while autopath answers
// by source) is left to ServeDNS.
func (h *Handler) AnswerWire(dst, query []byte) ([]byte, bool) {
	if h.ap != nil && h.ap.sourceIP {
		return dst, false
	}
	q, ok := dnsmsg.ParseQuery(query)
	if !ok {
		return dst, false
	}
	// The name as asked keys the reply cache. It is written in dst, which
	// the reply overwrites only once the lookup is done: a key on the stack
	// would escape to the heap through the cache's map. The lowercase name
	// is made only for a miss.
	name := dnsmsg.AppendName(dst[:0], q.Name, false)
	inCluster := inZoneFold(name, h.zoneName)
	outside := !inCluster && !inZoneFold(name, reverse4) && !inZoneFold(name, reverse6)
	// The reply cache holds replies of other names only through rewrites.
	z := h.zone()
	if z != nil && (!outside || h.rw != nil) {
		if b, ok := h.cached(dst, z, wireKey(&q, name), q.ID, q.RD, q.CD); ok {
			return b, true
		}
	}
	var lbuf [256]byte
	lname := dnsmsg.AppendName(lbuf[:0], q.Name, true)
	if !outside {
		if z == nil || !h.wireMisses || !inCluster {
			return dst, false
		}
		return h.missWire(dst, z, &q, lname)
	}
	return h.forwardedWire(dst, &q, lname)
}

// forwardedWire answers q, whose lowercase name lname is outside the
// cluster and reverse zones, from the answer cache (dnscache.AnswerWire)
// when ServeDNS would forward it as it is: of class IN or ANY, not under
// the autopath suffix, without static records, and no rewrites
// configured. The cache has a reply only where ServeDNS kept one, for the
// same shape and load balancing.
func (h *Handler) forwardedWire(dst []byte, q *dnsmsg.WireQuery, lname []byte) ([]byte, bool) {
	cache, ok := h.fwd.(*dnscache.Cache)
	if !ok || h.rw != nil || (q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY) ||
		q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR || inZone(lname, autopath.Suffix) {
		return dst, false
	}
	if h.static != nil {
		if _, found := h.static.Lookup(string(lname), q.Qtype); found {
			return dst, false
		}
	}
	return cache.AnswerWire(dst, q, shapeLB(q.Shape(), h.lb))
}

func (h *Handler) write(w dns.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.Debug("write reply", "remote", w.RemoteAddr().String(), "err", err)
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// respond builds the reply to req: the message that goes on the wire,
// truncated to what the client can receive. A forwarded reply made from an
// answer of the answer cache that nothing here changed per reply (no
// rewrite, no rotation) comes with the cache's ticket, for Keep. A UDP
// reply made here whose answer was cut to the UDP answer limit says how
// (cut), for the reply cache.
func (h *Handler) respond(ctx context.Context, req *dns.Msg, tcp bool) (reply *dns.Msg, local bool, deps []string, t dnscache.Ticket, cut *udpCut) {
	asked := req
	var rev *reversal
	if h.rw != nil {
		var err error
		if req, rev, err = h.rewriteRequest(req); err != nil {
			h.log.DebugContext(ctx, "rewrite", "name", asked.Question[0].Name, "err", err)
			m := new(dns.Msg)
			m.SetRcode(asked, dns.RcodeServerFailure)
			return dnsmsg.Finish(asked, m, tcp), false, nil, t, nil
		}
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = h.fwd != nil
	made := false // answered here, not relayed from upstream: cut to the UDP answer limit
	switch _, rcode := dnsmsg.Check(req); {
	case rcode != dns.RcodeSuccess:
		m.Rcode = rcode
	case h.ap != nil && h.ap.owns(req.Question[0].Name):
		// Never cached: the answer depends on the search-list option.
		// Candidates outside the zone (host search domains) are each
		// forwarded: together they get one forwarding timeout.
		actx, cancel := context.WithTimeout(ctx, forward.DefaultTimeout)
		fill(m, h.ap.expand(actx, h, req, h.autopathTTL()))
		cancel()
		made = true
	case !h.local(req.Question[0]) && h.fwd == nil:
		m.Rcode = dns.RcodeRefused
	case !h.local(req.Question[0]):
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
		r := h.Resolve(ctx, req.Question[0])
		local = !r.Forwarded && !r.volatile
		deps = r.deps
		fill(m, r)
		made = true
	}
	if rev != nil {
		rev.msg(m, asked.Question)
		deps = append(deps, rev.names...)
		t = dnscache.Ticket{}
	}
	if made {
		cut = h.limitUDP(m, tcp)
	}
	if h.lb {
		if r := rotateAnswer(m.Answer, h.lbN.Add(1)); len(r) > 0 && &r[0] != &m.Answer[0] {
			m.Answer, t = r, dnscache.Ticket{}
		}
	}
	if h.rw != nil || (h.ap != nil && h.ap.sourceIP) {
		t = dnscache.Ticket{} // AnswerWire would not use it
	}
	return dnsmsg.Finish(asked, m, tcp), local, deps, t, cut
}

// rewriteRequest is req with its question renamed by the rewrites, and
// how to undo it; req itself and a nil reversal when no rule matched. A
// query with other than one question is left alone, and so is an
// autopath name: its candidates are rewritten (resolveCandidate).
func (h *Handler) rewriteRequest(req *dns.Msg) (*dns.Msg, *reversal, error) {
	if len(req.Question) != 1 || (h.ap != nil && h.ap.owns(req.Question[0].Name)) {
		return req, nil, nil
	}
	name, rev, err := h.rw.rewrite(req.Question[0].Name)
	if err != nil || rev == nil {
		return req, nil, err
	}
	r := *req
	r.Question = []dns.Question{{Name: name, Qtype: req.Question[0].Qtype, Qclass: req.Question[0].Qclass}}
	return &r, rev, nil
}

// fill puts a Result into a reply.
func fill(m *dns.Msg, r Result) {
	m.Rcode = r.Rcode
	m.Authoritative = r.Authoritative
	m.Answer, m.Ns, m.Extra = r.Answer, r.Ns, r.Extra
}

// forwardMsg relays the client's query upstream as it is (keeping its EDNS0
// options and DO bit) and returns the reply, ready for our OPT, and the
// answer cache's ticket when the forwarder is one (*dnscache.Cache: serve's)
// and answered from its cache.
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
	if fc, ok := h.fwd.(*dnscache.Cache); ok {
		r, _, t, err = fc.AnswerTicket(ctx, up)
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

// rotateAnswer returns rrs with each run of A, AAAA, or same-priority SRV
// records of one owner rotated to start at its record c mod len, in a new
// slice (rrs may be shared), or rrs itself when there is nothing to rotate.
func rotateAnswer(rrs []dns.RR, c uint32) []dns.RR {
	var out []dns.RR
	for i := 0; i < len(rrs); {
		j := i + 1
		for j < len(rrs) && sameRun(rrs[i], rrs[j]) {
			j++
		}
		if n := j - i; n >= 2 {
			if out == nil {
				out = slices.Clone(rrs)
			}
			k := int(c % uint32(n))
			copy(out[i:], rrs[i+k:j])
			copy(out[i+n-k:], rrs[i:i+k])
		}
		i = j
	}
	if out == nil {
		return rrs
	}
	return out
}

// sameRun reports whether b continues a's run: same owner and type, A, AAAA
// or SRV of the same priority.
func sameRun(a, b dns.RR) bool {
	ha, hb := a.Header(), b.Header()
	if ha.Rrtype != hb.Rrtype || !strings.EqualFold(ha.Name, hb.Name) {
		return false
	}
	switch ha.Rrtype {
	case dns.TypeA, dns.TypeAAAA:
		return true
	case dns.TypeSRV:
		sa, ok1 := a.(*dns.SRV)
		sb, ok2 := b.(*dns.SRV)
		return ok1 && ok2 && sa.Priority == sb.Priority
	}
	return false
}
