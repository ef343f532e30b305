package clusterdns

import (
	"slices"
	"strings"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/wirerotate"
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

// withReplies sets the reply cache; tests keep a typed handle on it.
func withReplies(c replyCache) Option { return func(h *Handler) { h.wire = c } }

// reply is what the reply cache keeps of one reply: its packed form, with
// RD and CD clear (they are set per request), and what a hit does with it.
// The cache holds a pointer: a hit gets it back in one register.
type reply struct {
	wire []byte
	// lb rotates the answer's RRsets per hit (WithLoadBalance); nil when
	// the reply has nothing to rotate or cannot be rotated in place.
	lb *wirerotate.Rotation
	// win hands out the next records of an answer cut to the UDP answer
	// limit per hit (WithUDPAnswerLimit); wire then holds them all.
	win *wirerotate.Window
	// amp is what the query adds to the namespace metrics
	// (WithAmplification); it is not Counted when they are off or do not
	// count it.
	amp nsmetrics.Count
}

// cacheKeyOf returns the cache key of a request, and false for requests
// whose reply is not cacheable: responses, and queries dnsmsg.Check rejects
// (not exactly one question, not a plain query, EDNS versions other than 0).
// The size limit is dnsmsg.ReplySize, the size Finish truncates to.
func cacheKeyOf(req *dns.Msg, tcp bool) (replycache.Key, bool) {
	opt, rcode := dnsmsg.Check(req)
	return checkedKey(req, opt, rcode, tcp)
}

// checkedKey is cacheKeyOf for a request dnsmsg.Check has read: opt and
// rcode are what it returned.
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

// wireKey is cacheKeyOf for a UDP query read by dnsmsg.ParseQuery (which
// reads only plain queries dnsmsg.Check accepts), name being its name as
// dnsmsg.AppendName writes it: the same key as for the same query
// unpacked. The key borrows name, so it is good for Get only, and only
// while name is.
func wireKey(q *dnsmsg.WireQuery, name []byte) replycache.Key {
	return replycache.Key{Name: borrowString(name), Qtype: q.Qtype, Qclass: q.Qclass,
		EDNS: q.EDNS, DO: q.DO, Limit: uint16(q.ReplySize())}
}

// cached appends to dst the reply to a request with key k from the reply
// cache, with the request's id and RD and CD bits, and counts it in the
// namespace metrics; false when the cache has no reply for k.
func (h *Handler) cached(dst []byte, k replycache.Key, id uint16, rd, cd bool) ([]byte, bool) {
	r, ok := h.wire.Get(k)
	if !ok {
		return dst, false
	}
	var b []byte
	switch {
	case r.win != nil:
		b = r.win.Apply(dst[:0], r.wire)
	case r.lb != nil:
		b = r.lb.Apply(dst[:0], r.wire)
	default:
		b = append(dst[:0], r.wire...)
	}
	b[0], b[1] = byte(id>>8), byte(id)
	if rd {
		b[2] |= 0x01
	}
	if cd {
		b[3] |= 0x10
	}
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
		r.wire, r.win = h.windowReply(m, cut, int(k.Limit))
	} else {
		r.wire = append([]byte(nil), b...)
		r.wire[2] &^= 0x01
		r.wire[3] &^= 0x10
		if h.lb {
			r.lb = wirerotate.Plan(r.wire)
		}
	}
	if r.wire == nil {
		return
	}
	h.wire.Put(k, r, len(r.wire), z.epoch, append(deps, lowerFQDN(k.Name)))
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
// whose answer was cut: m packed with its whole answer and the window
// that hands it out, the next records on each hit; nil when it cannot be
// served that way (m truncated, or PlanWindow's reasons). Loadbalance
// adds nothing: the window moves on every hit.
func (h *Handler) windowReply(m *dns.Msg, cut *udpCut, size int) ([]byte, *wirerotate.Window) {
	if m.Truncated {
		return nil, nil
	}
	whole := *m
	whole.Answer = cut.full
	b, err := whole.Pack()
	if err != nil {
		return nil, nil
	}
	// The cached form has RD and CD clear; they are set per request.
	b[2] &^= 0x01
	b[3] &^= 0x10
	w := wirerotate.PlanWindow(b, h.udpLimit, size, cut.c)
	if w == nil {
		return nil, nil
	}
	return b, w
}

// Load balancing (WithLoadBalance) rotates the answer's RRsets per reply:
// a message before it is packed (rotateAnswer), and a cached reply in its
// packed form, one step per hit (package wirerotate). Both give the same
// order.

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
