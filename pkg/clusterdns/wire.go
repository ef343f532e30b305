package clusterdns

import (
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// AnswerWire implements dnsserver.WireAnswerer: a UDP query is answered
// from its wire form, on the socket's reading goroutine, without being
// unpacked, when the reply is the one ServeDNS would send and is at hand:
//   - a reply of the reply cache (admitWire makes the key admit makes
//     for the same query);
//   - a forwarded reply the answer cache keeps for the query's shape
//     (forwardedWire);
//   - WithWireMisses, a name of the zone that does not exist or has one
//     address of the asked type (missWire).
//
// The stages are ServeDNS's, with a byte-level admit, and how the query is
// answered is decide's. Everything else (a miss, a query admitWire leaves
// to miekg/dns, a name rewrites may rename, and every query while autopath
// answers by source) is left to ServeDNS.
func (h *Handler) AnswerWire(dst, msg []byte) ([]byte, bool) {
	var q query
	if !h.admitWire(&q, dst, msg) {
		return dst, false
	}
	if b, ok := q.fromCache(dst); ok {
		return b, true
	}
	return q.answerWire(dst)
}

// answerWire is the answer stage of the wire path: the replies it can
// write without a dns.Msg, else false.
func (q *query) answerWire(dst []byte) ([]byte, bool) {
	h := q.h
	q.d = decide(h, q.z, q.wire.Qtype, q.wire.Qclass, q.lowerWire())
	if q.d.rewrite {
		return dst, false
	}
	switch q.d.route {
	case routeZone:
		if h.wireMisses && inZone(q.lname, h.zoneName) && !topology.MaybeScoped(q.lname) {
			return h.missWire(dst, q.d.z, &q.wire, q.lname)
		}
	case routeForward:
		if h.answers != nil {
			return h.answers.AnswerWire(dst, q.wire, shapeLB(q.wire.Shape(), h.lb))
		}
	}
	return dst, false
}
