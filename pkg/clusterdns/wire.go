package clusterdns

import (
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// AnswerWire implements dnsserver.WireAnswerer: a UDP query is answered
// from its wire form, on the socket's reading goroutine, without being
// unpacked, when the reply is the one ServeDNS would send and is at hand:
//   - a reply of the reply cache (its key, wireKey, is checkedKey's for
//     the same query);
//   - a forwarded reply the answer cache keeps for the query's shape
//     (forwardedWire);
//   - WithWireMisses, a name of the zone that does not exist or has one
//     address of the asked type (missWire).
//
// How the query is answered is decide's, as for ServeDNS. Everything else
// (a miss, a query ParseQuery leaves to miekg/dns, a name rewrites may
// rename, and every query while autopath answers by source) is left to
// ServeDNS.
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
	// would escape to the heap through the cache's map.
	name := dnsmsg.AppendName(dst[:0], q.Name, false)
	if z := h.zone(); z != nil {
		if perClient(z, q.Name) {
			return dst, false // the answer depends on the client's source
		}
		if b, ok := h.cached(dst, wireKey(&q, name), q.ID, q.RD, q.CD); ok {
			return b, true
		}
	}
	var lbuf [256]byte
	lname := dnsmsg.AppendName(lbuf[:0], q.Name, true)
	d := decide(h, q.Qtype, q.Qclass, lname)
	if d.rewrite {
		return dst, false
	}
	switch d.route {
	case routeZone:
		if h.wireMisses && inZone(lname, h.zoneName) && !topology.MaybeScoped(lname) {
			return h.missWire(dst, d.z, &q, lname)
		}
	case routeForward:
		if h.answers != nil {
			return h.answers.AnswerWire(dst, q, shapeLB(q.Shape(), h.lb))
		}
	}
	return dst, false
}

// perClient reports whether the answer to the wire name (dnsmsg's form)
// depends on the client: AnswerWire, which does not know the client,
// leaves such a query to ServeDNS.
func perClient(z *zone, wireName []byte) bool {
	if z.snap.Counts.Variants == 0 {
		return false
	}
	var buf [256]byte
	return z.snap.HasVariants(borrowString(dnsmsg.AppendName(buf[:0], wireName, true)))
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
