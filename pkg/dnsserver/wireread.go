package dnsserver

import (
	"net"
	"time"

	"github.com/miekg/dns"
)

// WireAnswerer is implemented by a Handler that can answer some UDP queries
// from their wire form: the Server then asks it first, on the goroutine
// that reads the socket, and writes the reply at once, without miekg/dns
// unpacking the query, starting a goroutine for it or calling ServeDNS.
// Every other datagram is served as usual. A handler that cannot answer a
// query fast (without waiting on anything but a lock held briefly) must
// return false, since the socket is not read meanwhile.
//
// The cluster Handler implements it for its cached zone replies, the
// node-local stage's handler for its cache hits.
type WireAnswerer interface {
	// AnswerWire returns the reply to the UDP query q appended to dst[:0],
	// and true; or false, having written nothing, for a query that
	// ServeDNS is to answer. It must keep neither q nor the reply.
	AnswerWire(dst, q []byte) ([]byte, bool)
}

// aLongTimeAgo is a read deadline in the past: reads fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// wireReader reads a listener's UDP datagrams. While the current handler
// is a WireAnswerer it reads them itself, into one buffer of its own
// (ReadUDP runs on the one goroutine that serves the socket), answers those
// the handler answers from their wire form and reads on; another datagram
// is returned, copied, to miekg/dns, which unpacks it and serves it as
// usual. Otherwise it is miekg/dns's reader.
//
// miekg/dns sets a read deadline before every read so that its loop looks
// at whether the server is stopping; ShutdownContext sets it in the past
// to end the read in progress. The wire reader clears the deadline once
// instead, and reads until a datagram arrives or that past deadline ends
// the read. Server.Shutdown marks the server stopping before it calls
// ShutdownContext: a reader that sees the mark sets a past deadline itself
// and reads through miekg/dns's reader, which keeps it unless the server
// is still started (ShutdownContext, still to come, then sets it again).
type wireReader struct {
	dns.Reader
	s        *Server
	g        *guard
	buf, out []byte
	cleared  bool         // the read deadline has been cleared
	listen   *listenCount // the listen address's query counter
}

var _ dns.PacketConnReader = (*wireReader)(nil)

// ReadUDP implements dns.Reader.
func (r *wireReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *dns.SessionUDP, error) {
	for {
		if _, ok := (*r.g.handler.Load()).(WireAnswerer); !ok {
			r.cleared = false
			return r.Reader.ReadUDP(conn, timeout)
		}
		if !r.cleared {
			if err := conn.SetReadDeadline(time.Time{}); err != nil {
				return nil, nil, err
			}
			r.cleared = true
		}
		if r.s.stopping.Load() {
			r.cleared = false
			if err := conn.SetReadDeadline(aLongTimeAgo); err != nil {
				return nil, nil, err
			}
			return r.Reader.ReadUDP(conn, timeout)
		}
		if r.buf == nil {
			r.buf = make([]byte, readBuffer)
		}
		n, sess, err := dns.ReadFromSessionUDP(conn, r.buf)
		if err != nil {
			return nil, nil, err
		}
		m := r.buf[:n]
		// The handler of a datagram is the one current once it is read
		// (SetHandler).
		if wa, ok := (*r.g.handler.Load()).(WireAnswerer); ok && n >= 12 {
			start := r.g.req.now()
			if out, ok := r.answer(wa, m); ok {
				// Counted before the reply leaves, as ServeDNS's.
				r.g.req.wire(m, out, sess.RemoteAddr(), start)
				r.listen.queries.Add(1)
				if _, err := dns.WriteToSessionUDP(conn, out, sess); err != nil {
					r.g.log.Debug("write reply", "remote", sess.RemoteAddr().String(), "err", err)
				}
				continue
			}
		}
		return append(make([]byte, 0, n), m...), sess, nil
	}
}

// answer asks wa for the reply to q. A panic is counted and logged as the
// handler's (dnsconfigurer_dnsserver_panics_total) and the query is then
// served as usual.
func (r *wireReader) answer(wa WireAnswerer, q []byte) (out []byte, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			r.g.panicked(v, "query left to ServeDNS")
			out, ok = nil, false
		}
	}()
	out, ok = wa.AnswerWire(r.out[:0], q)
	if ok && cap(out) <= dns.MaxMsgSize {
		r.out = out[:0]
	}
	return out, ok
}

// ReadPacketConn implements dns.PacketConnReader (the listener's UDP
// socket is a *net.UDPConn: this is miekg/dns's).
func (r *wireReader) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	return r.Reader.(dns.PacketConnReader).ReadPacketConn(conn, timeout)
}
