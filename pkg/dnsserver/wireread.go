package dnsserver

import (
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/udpbatch"
)

// WireAnswerer is implemented by a Handler that can answer some UDP queries
// from their wire form: the Server then asks it first, on the goroutine
// that reads the socket, and writes the reply with the other replies of
// the same batch, without miekg/dns unpacking the query, starting a
// goroutine for it or calling ServeDNS. Every other datagram is served as
// usual. A handler that cannot answer a query fast (without waiting on
// anything but a lock held briefly) must return false, since the socket is
// not read meanwhile.
//
// The cluster Handler implements it for its cached zone replies, its
// forwarded cache hits and the zone's NXDOMAINs, the node-local stage's
// handler for its cache hits.
type WireAnswerer interface {
	// AnswerWire returns the reply to the UDP query q appended to dst[:0],
	// and true; or false for a query that ServeDNS is to answer. It may use
	// dst's capacity as scratch either way. It must keep neither q nor the
	// reply.
	AnswerWire(dst, q []byte) ([]byte, bool)
}

// aLongTimeAgo is a read deadline in the past: reads fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// answer asks wa for the reply to m's query into m's reply buffer. A
// panic is counted and logged as the handler's
// (dnsconfigurer_dnsserver_panics_total) and the query is then served as
// usual.
func (u *udpSocket) answer(wa WireAnswerer, m *udpbatch.Msg) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			u.g.panicked(v, "query left to ServeDNS")
			ok = false
		}
	}()
	if m.Out == nil {
		// Kept with the slot: the answerer's scratch and the next reply.
		m.Out = make([]byte, 0, replyBuf)
	}
	out, ok := wa.AnswerWire(m.Out[:0], m.Buf)
	if ok {
		m.Out = out
	}
	return ok
}

// replyBuf is the first capacity of a slot's reply buffer: a reply that
// fits in the classic UDP size.
const replyBuf = dns.MinMsgSize

// keepReply drops a reply buffer too large to keep for the next datagram.
func keepReply(m *udpbatch.Msg) {
	if cap(m.Out) > dns.MaxMsgSize {
		m.Out = nil
	}
}
