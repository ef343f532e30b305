package clusterdns

import (
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nsmetrics"
	"github.com/miekg/dns"
)

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
// it adds to the namespace metrics (WithAmplification; not Counted when
// they are off or do not count it). The cache holds a pointer: a hit gets
// it back in one register.
type reply struct {
	replycache.Reply
	amp nsmetrics.Count
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

// wireKey is checkedKey for a UDP query read by dnsmsg.ParseQuery (which
// reads only plain queries dnsmsg.Check accepts), name being its name as
// dnsmsg.AppendName writes it: the same key as for the same query
// unpacked. The key borrows name, so it is good for Get only, and only
// while name is.
func wireKey(q *dnsmsg.WireQuery, name []byte) replycache.Key {
	return replycache.Key{Name: borrowString(name), Qtype: q.Qtype, Qclass: q.Qclass,
		EDNS: q.EDNS, DO: q.DO, Limit: uint16(q.ReplySize())}
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

// windowReply is what the reply cache keeps of m, a finished UDP reply
// whose answer was cut: m packed with its whole answer, handing out the
// next records on each hit; false when it cannot be served that way (m
// truncated, or replycache.NewWindow's reasons). Loadbalance adds
// nothing: the window moves on every hit.
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
	return replycache.NewWindow(b, h.udpLimit, size, cut.c)
}
