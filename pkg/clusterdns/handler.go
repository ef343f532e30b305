package clusterdns

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnscache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// Records is what the handler reads: the current snapshot of the record
// store, nil until the first full sync. *store.Store implements it.
type Records interface {
	Snapshot() *store.Snapshot
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
// for concurrent use, keep no part of name (the wire path lends it) and not
// modify the returned records afterwards (the handler does not modify them
// either).
type Static interface {
	Lookup(name string, qtype uint16) (rrs []dns.RR, found bool)
}

// Handler answers queries for the cluster zone from Records and forwards
// the others. It implements dns.Handler.
type Handler struct {
	zoneName string
	records  Records
	fwd      Exchanger
	answers  AnswerCache // nil: forwarded replies are not kept (WithAnswerCache)
	log      *slog.Logger
	ap       *autopathExpander // nil: autopath off
	topoCode uint16            // the topology option's code (WithTopology), 0: none
	static   Static
	// delegated are zones inside the cluster zone whose names are
	// forwarded, not answered from the zone.
	delegated []string
	reverse   []reverseAuth    // reverse zones answered authoritatively
	scope     []netip.Prefix   // WithReverseScope
	noZone    bool             // WithoutClusterZone
	cset      *clusterset      // WithClusterset; nil: off
	lb        bool             // rotate A, AAAA and SRV RRsets per reply
	lbN       atomic.Uint32    // replies rotated on the miss path
	udpLimit  int              // A or AAAA records in a UDP reply; 0: all
	cutN      atomic.Uint32    // replies cut to udpLimit on the miss path
	amp       NamespaceMetrics // nil: no namespace metrics
	// wireMisses answers the zone's NXDOMAINs and one-address replies
	// from the wire (missWire).
	wireMisses bool
	rw         *rewriter  // nil: no rewrites
	tpl        *templates // nil: no templates
	ext        *external  // nil: no external zones
	// wire caches packed replies across snapshots.
	wire       replyCache
	replyBytes int64 // the bound of the default reply cache (WithReplyCache)

	views views // of h.records
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

// WithReplyCache bounds the packed replies cached at bytes (default
// DefaultReplyCacheBytes; 0 keeps the default). The replies in use stay
// while a flood of one-off names churns the rest, and a new snapshot
// retires only the replies made from names that changed (see replyCache).
func WithReplyCache(bytes int64) Option {
	return func(h *Handler) {
		if bytes > 0 {
			h.replyBytes = bytes
		}
	}
}

// WithWireMisses answers from its wire form (AnswerWire), without
// unpacking it, a UDP query the reply cache misses for a name of the zone
// that does not exist (NXDOMAIN with the zone's SOA) or that has exactly
// one address of the asked type, A or AAAA: the bytes ServeDNS sends
// (missWire). Off by default; serve turns it on.
func WithWireMisses() Option { return func(h *Handler) { h.wireMisses = true } }

// NamespaceMetrics counts each query in the namespace of the pod asking.
// *nsmetrics.Metrics implements it. Record counts a plain query for qname
// (as asked; kept by no part) once, at the end, answered rcode from snap;
// bySource marks a first search step autopath answered by source, dep
// (nil: none) gets the lowercase names the count depends on. It returns a
// tally (0: counted nowhere) that the handler keeps with a cached reply and
// Observes on each hit.
type NamespaceMetrics interface {
	Record(qname string, snap *store.Snapshot, rcode int, bySource bool, dep func(string)) (tally uint64)
	Observe(tally uint64)
}

// WithAmplification counts the handler's queries per namespace in m, made
// for the handler's zone and records. m serves one handler.
func WithAmplification(m NamespaceMetrics) Option { return func(h *Handler) { h.amp = m } }

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
		auth = append(auth, reverseAuth{prefix: p, bits: bits, zone: store.ReverseZone(zp)})
	}
	return func(h *Handler) { h.reverse = auth }, nil
}

// WithoutClusterZone answers no name from the snapshot: the names of the
// cluster domain and the reverse names go on to the templates, static
// records and forwarders like any other, as a CoreDNS without its
// kubernetes plugin.
func WithoutClusterZone() Option {
	return func(h *Handler) { h.noZone = true }
}

// WithReverseScope answers from the snapshot only the reverse names of
// addresses inside scope (and those of the WithReverseZones zones): the
// other reverse names go on to the static records and the forwarders, as
// CoreDNS's kubernetes plugin with CIDR zones alone. Without it every
// address of the snapshot is answered.
func WithReverseScope(scope []netip.Prefix) Option {
	return func(h *Handler) { h.scope = scope }
}

// NewHandler returns a Handler for the cluster zone (e.g. "cluster.local")
// reading records from r.
func NewHandler(zoneName string, r Records, opts ...Option) *Handler {
	h := &Handler{zoneName: lowerFQDN(zoneName), records: r, replyBytes: DefaultReplyCacheBytes}
	for _, o := range opts {
		o(h)
	}
	if h.wire == nil {
		h.wire = newReplyCache(h.replyBytes)
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

// Synced reports whether the records have had their first full sync.
func (h *Handler) Synced() bool { return h.records.Snapshot() != nil }

// zone returns the zone view of the current snapshot, making it on first
// use: the reply cache then retires the replies made from names that
// changed since the view before.
func (h *Handler) zone() *zone {
	return h.views.current(h.records, func(prev, z *zone) {
		if prev != nil {
			z.epoch = prev.epoch + 1
		}
		h.wire.Advance(z.epoch, h.changes(prev, z))
	})
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

// Exchanger sends a query upstream and returns the reply.
// *forward.Forwarder, *forward.Router and *dnscache.Cache implement it,
// and forward.Forwarding too: the handler then asks on behalf of its
// client (forward.Ask), for the client's share of the forwarder's slots.
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
	AnswerTicket(ctx context.Context, m *dns.Msg, o dnsmsg.Origin) (dnscache.Answered, error)
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

// WithTopology reads the client's topology from the EDNS0 local option of
// code (api topologyOptionCode), which node-local adds, and takes it off
// every query, so that it is never forwarded. 0 reads none.
func WithTopology(code uint16) Option { return func(h *Handler) { h.topoCode = code } }

// DefaultReplyCacheBytes bounds the packed replies a Handler caches
// unless WithReplyCache says otherwise: about 60,000 replies of a cluster
// zone (a reply with its key and overhead costs about 250 bytes), room for
// the search-list misses of a busy cluster's working set. It is
// v1alpha1's DefaultZoneBytes.
var DefaultReplyCacheBytes = v1alpha1.DefaultZoneBytes.Bytes()

// replyIdle is the age at which the reply cache's current generation
// becomes the previous one: a reply unasked for one to two periods is
// dropped.
const replyIdle = time.Minute

// replyCache keeps the zone's packed replies across snapshots, keyed by
// the question as asked. A reply is served until a name it was made from
// changes. *replycache.Cache[*reply] implements it.
type replyCache interface {
	// Get keeps no part of k.Name (wireKey borrows it).
	Get(k replycache.Key) (*reply, bool)
	// Put drops r unless epoch is the one of the last Advance.
	Put(k replycache.Key, r *reply, size int, epoch uint64, deps []string)
	// Advance moves on to the snapshot epoch; changed retires the names
	// that changed, or returns false when it cannot tell.
	Advance(epoch uint64, changed func(retire func(name string)) bool)
}

var _ replyCache = (*replycache.Cache[*reply])(nil)

// newReplyCache is the default reply cache, of at most bytes of replies.
func newReplyCache(bytes int64) replyCache { return replycache.New[*reply](bytes, replyIdle) }

// reply is what the reply cache keeps of one reply: its packed form,
// rotated or cut per hit (WithLoadBalance, WithUDPAnswerLimit), and what
// it adds to the namespace metrics (WithAmplification; 0 when they are off
// or do not count it). The cache holds a pointer: a hit gets
// it back in one register.
type reply struct {
	replycache.Reply
	tally uint64
}

// changes is how the reply cache moves from prev to z: it retires the
// names that changed between their snapshots and the apexes, whose SOA
// serial moved. nil when there is no prev: nothing is cached yet.
func (h *Handler) changes(prev, z *zone) func(retire func(string)) bool {
	if prev == nil {
		return nil
	}
	return func(retire func(string)) bool {
		retire = withAncestors(retire)
		if !z.snap.ChangedSince(prev.snap, retire) {
			return false
		}
		for _, n := range h.apexes(z) {
			retire(n)
		}
		return true
	}
}

// withAncestors is retire that also retires a reverse name's ancestors:
// whether they exist (authoritative reverse zones) depends on the
// addresses below them.
func withAncestors(retire func(string)) func(string) {
	return func(name string) {
		retire(name)
		rz := reverseZone(name)
		if rz == "" {
			return
		}
		for rest := name; len(rest) > len(rz); {
			i := strings.IndexByte(rest, '.')
			if i < 0 {
				return
			}
			rest = rest[i+1:]
			retire(rest)
		}
	}
}

// WithUDPAnswerLimit cuts, in every UDP reply this server makes (the
// zone's and autopath's, not a forwarded one), an A or AAAA RRset of more
// than n records to n: dnsmsg.LimitAnswer, TC clear. Over TCP the reply
// holds them all. 0 (default) is off.
func WithUDPAnswerLimit(n int) Option { return func(h *Handler) { h.udpLimit = n } }

// udpCut is how a UDP reply was cut to the answer limit: its answer
// before the cut and the counter its window was taken at.
type udpCut struct {
	full []dns.RR
	c    uint32
}

// limitUDP cuts m's answer to the UDP answer limit (a TCP reply is left
// whole), and says how; nil when nothing was cut.
func (h *Handler) limitUDP(m *dns.Msg, tcp bool) *udpCut {
	if tcp || h.udpLimit <= 0 || len(m.Answer) <= h.udpLimit {
		return nil
	}
	c := h.cutN.Add(1)
	cut := dnsmsg.LimitAnswer(m.Answer, h.udpLimit, c)
	if len(cut) == len(m.Answer) {
		return nil
	}
	full := m.Answer
	m.Answer = cut
	return &udpCut{full: full, c: c}
}
