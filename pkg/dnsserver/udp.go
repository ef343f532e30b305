package dnsserver

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// udpBatch is the most datagrams one read takes from a socket (recvmmsg),
// and so the most replies one write sends (sendmmsg). A socket holds
// udpBatch read buffers of readBuffer bytes (64 KiB).
const udpBatch = 16

// headerSize is a DNS header's; a shorter datagram is dropped unanswered,
// as miekg/dns drops it.
const headerSize = 12

// udpMsg is one datagram of a batch and, when it was answered from its
// wire form, its reply.
type udpMsg struct {
	buf   []byte         // the datagram as read, cut at readBuffer bytes
	arena []byte         // buf's backing array, readBuffer bytes
	peer  netip.AddrPort // the client
	dst   netip.Addr     // the query's destination address, when the socket reports it (a wildcard bind): the reply's source
	out   []byte         // the reply (reply set), reused for the next datagram
	reply bool
	raw   rawMsg // the batch path's own state (udp_linux.go)
}

// packetIO reads and writes one socket's datagrams: a batch at a time
// (recvmmsg and sendmmsg on Linux), or one at a time.
type packetIO interface {
	// read fills ms[:n] with what it read, at least one datagram; it
	// blocks until one arrives or the socket's read deadline passes.
	read(ms []udpMsg) (n int, err error)
	// write sends the reply of every message of ms that has one, and
	// returns the last error (each datagram is tried).
	write(ms []udpMsg) error
}

// udpSocket is one of the UDP sockets of a listen address and the
// goroutine that reads it: it answers from the wire form what the handler
// answers so, writes those replies as a batch, and starts a goroutine for
// every other datagram, which miekg/dns unpacks and the handler serves.
type udpSocket struct {
	conn   *net.UDPConn
	io     packetIO
	ms     []udpMsg
	g      *guard
	lh     listenHandler
	pktinf bool // the socket reports each datagram's destination (a wildcard bind)
	set    *udpSet
	// Tests: the datagrams of a header or more read (how the kernel spread
	// them), and the reads that returned any.
	read, batches atomic.Uint64
}

// udpSet are the UDP sockets of one Start and the goroutines serving
// them.
type udpSet struct {
	socks    []*udpSocket
	loops    sync.WaitGroup // the reading goroutines
	inflight sync.WaitGroup // the queries being served by ServeDNS
	log      *slog.Logger
	stopping *atomic.Bool
}

// newUDPSocket prepares conn to be served: its messages' buffers, its
// batch path (or one datagram at a time with perDatagram, or where
// batching is unavailable), and the destination address of every datagram
// when conn is bound to a wildcard address (as miekg/dns does, so that a
// reply leaves from the address the query was sent to).
func newUDPSocket(conn *net.UDPConn, g *guard, lh listenHandler, set *udpSet, perDatagram bool) (*udpSocket, error) {
	u := &udpSocket{conn: conn, g: g, lh: lh, set: set}
	if la, ok := conn.LocalAddr().(*net.UDPAddr); ok && la.IP.IsUnspecified() && oobSize > 0 {
		err6 := ipv6.NewPacketConn(conn).SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true)
		err4 := ipv4.NewPacketConn(conn).SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true)
		if err6 != nil && err4 != nil {
			return nil, err4
		}
		u.pktinf = true
	}
	n := udpBatch
	if !perDatagram {
		u.io = newBatchIO(conn, u.pktinf)
	}
	if u.io == nil {
		u.io, n = &datagramIO{conn: conn, pktinf: u.pktinf}, 1
	}
	arena := make([]byte, n*readBuffer)
	u.ms = make([]udpMsg, n)
	for i := range u.ms {
		u.ms[i].arena = arena[i*readBuffer : (i+1)*readBuffer : (i+1)*readBuffer]
	}
	return u, nil
}

// serve reads the socket until it is closed or the server stops.
func (u *udpSocket) serve(stopping *atomic.Bool) {
	defer u.set.loops.Done()
	for {
		n, err := u.io.read(u.ms)
		if err != nil {
			if stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			if batchUnavailable(err) {
				// A kernel or sandbox without recvmmsg: one datagram at a time.
				u.io, u.ms = &datagramIO{conn: u.conn, pktinf: u.pktinf}, u.ms[:1]
				continue
			}
			var t interface{ Temporary() bool }
			if errors.As(err, &t) && t.Temporary() {
				continue
			}
			u.set.log.Error("dns server stopped", "err", err)
			return
		}
		u.handle(u.ms[:n])
	}
}

// handle serves one batch: the wire answers first, as they are found,
// then the handler's other datagrams are handed to goroutines, then the
// wire replies leave together.
func (u *udpSocket) handle(ms []udpMsg) {
	h := *u.g.handler.Load() // the handler current once the batch is read (SetHandler)
	wa, wire := h.(WireAnswerer)
	var start = u.g.req.now()
	u.batches.Add(1) // before any answer leaves (tests count them)
	var replies uint64
	for i := range ms {
		m := &ms[i]
		m.reply = false
		if len(m.buf) < headerSize {
			continue
		}
		if wire && u.answer(wa, m) {
			// Counted before the reply leaves, as ServeDNS's.
			u.g.req.wire(m.buf, m.out, addrFamily(m.peer.Addr()), start)
			m.reply = true
			replies++
			continue
		}
		// Counted before its goroutine can answer it.
		u.read.Add(1)
		u.serveDNS(m)
	}
	u.read.Add(replies) // the wire answers, before they leave
	if replies == 0 {
		return
	}
	u.lh.c.queries.Add(replies)
	if err := u.io.write(ms); err != nil {
		u.set.log.Debug("write reply", "err", err)
	}
	for i := range ms {
		keepReply(&ms[i])
	}
}

// serveDNS serves m's datagram on a goroutine of its own, as miekg/dns
// does: the datagram is copied, since its buffer is read into again.
func (u *udpSocket) serveDNS(m *udpMsg) {
	q := append(make([]byte, 0, len(m.buf)), m.buf...)
	peer := net.UDPAddrFromAddrPort(m.peer)
	if z := m.raw.zone(); z != "" && peer.Zone == "" {
		peer.Zone = z
	}
	w := &udpResponse{u: u, peer: peer, dst: m.dst}
	u.set.inflight.Add(1)
	go func() {
		defer u.set.inflight.Done()
		u.serveQuery(w, q)
	}()
}

// serveQuery is miekg/dns's Server.serveDNS for one UDP datagram of at
// least a header, with its default MsgAcceptFunc: a response is ignored;
// an opcode other than QUERY and NOTIFY gets NOTIMP; a query with other
// than one question, more than one answer or authority record or more
// than two additional records, or that does not unpack, gets FORMERR with
// its header (and its question, when that unpacked). Those replies are
// written directly, as miekg/dns writes them: neither the handler nor the
// metrics see them. Every other query goes to the listen address's
// handler.
func (u *udpSocket) serveQuery(w *udpResponse, q []byte) {
	dh := dns.Header{Id: binary.BigEndian.Uint16(q), Bits: binary.BigEndian.Uint16(q[2:]),
		Qdcount: binary.BigEndian.Uint16(q[4:]), Ancount: binary.BigEndian.Uint16(q[6:]),
		Nscount: binary.BigEndian.Uint16(q[8:]), Arcount: binary.BigEndian.Uint16(q[10:])}
	req := new(dns.Msg)
	action := dns.DefaultMsgAcceptFunc(dh)
	switch action {
	case dns.MsgAccept:
		if err := req.Unpack(q); err == nil {
			u.lh.ServeDNS(w, req)
			return
		}
		action = dns.MsgReject
	case dns.MsgIgnore:
		return
	default:
		setHeader(req, dh)
	}
	opcode := req.Opcode
	req.SetRcodeFormatError(req)
	req.Zero = false
	if action == dns.MsgRejectNotImplemented {
		req.Opcode = opcode
		req.Rcode = dns.RcodeNotImplemented
	}
	req.Ns, req.Answer, req.Extra = nil, nil, nil
	_ = w.WriteMsg(req)
}

// setHeader sets m's header from the packed one (miekg/dns's setHdr).
func setHeader(m *dns.Msg, dh dns.Header) {
	const (
		qr = 1 << 15
		aa = 1 << 10
		tc = 1 << 9
		rd = 1 << 8
		ra = 1 << 7
		z  = 1 << 6
		ad = 1 << 5
		cd = 1 << 4
	)
	m.Id = dh.Id
	m.Response = dh.Bits&qr != 0
	m.Opcode = int(dh.Bits>>11) & 0xF
	m.Authoritative = dh.Bits&aa != 0
	m.Truncated = dh.Bits&tc != 0
	m.RecursionDesired = dh.Bits&rd != 0
	m.RecursionAvailable = dh.Bits&ra != 0
	m.Zero = dh.Bits&z != 0
	m.AuthenticatedData = dh.Bits&ad != 0
	m.CheckingDisabled = dh.Bits&cd != 0
	m.Rcode = int(dh.Bits & 0xF)
}

// addrFamily is the slot of a client's address family (familyOf's).
func addrFamily(a netip.Addr) int {
	if a.Unmap().Is4() {
		return 0
	}
	return 1
}

// udpResponse is the dns.ResponseWriter of one UDP query served by
// ServeDNS (miekg/dns's response for UDP): the reply leaves the socket
// that read the query, from the address the query was sent to.
type udpResponse struct {
	u      *udpSocket
	peer   *net.UDPAddr
	dst    netip.Addr
	closed bool
}

var _ dns.ResponseWriter = (*udpResponse)(nil)

func (w *udpResponse) LocalAddr() net.Addr  { return w.u.conn.LocalAddr() }
func (w *udpResponse) RemoteAddr() net.Addr { return w.peer }

func (w *udpResponse) WriteMsg(m *dns.Msg) error {
	if w.closed {
		return errors.New("dns: WriteMsg called after Close")
	}
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (w *udpResponse) Write(b []byte) (int, error) {
	if w.closed {
		return 0, errors.New("dns: Write called after Close")
	}
	var oob []byte
	if w.u.pktinf && w.dst.IsValid() {
		var buf [oobSize]byte
		oob = buf[:putPktinfo(buf[:], w.dst)]
	}
	n, _, err := w.u.conn.WriteMsgUDP(b, oob, w.peer)
	return n, err
}

// Close marks the writer closed; the socket is the listener's and stays
// open.
func (w *udpResponse) Close() error {
	if w.closed {
		return errors.New("dns: connection already closed")
	}
	w.closed = true
	return nil
}

func (w *udpResponse) TsigStatus() error   { return nil }
func (w *udpResponse) TsigTimersOnly(bool) {}
func (w *udpResponse) Hijack()             {}

// datagramIO reads and writes one datagram at a time: where batching is
// unavailable.
type datagramIO struct {
	conn   *net.UDPConn
	pktinf bool
	oob    [oobSize]byte
	woob   [oobSize]byte
}

func (d *datagramIO) read(ms []udpMsg) (int, error) {
	m := &ms[0]
	var oob []byte
	if d.pktinf {
		oob = d.oob[:]
	}
	n, oobn, _, peer, err := d.conn.ReadMsgUDPAddrPort(m.arena, oob)
	if err != nil {
		return 0, err
	}
	m.buf, m.peer, m.dst = m.arena[:n], peer, netip.Addr{}
	m.raw = rawMsg{}
	if oobn > 0 {
		m.dst = parsePktinfo(d.oob[:oobn])
	}
	return 1, nil
}

func (d *datagramIO) write(ms []udpMsg) error {
	var last error
	for i := range ms {
		m := &ms[i]
		if !m.reply || len(m.out) == 0 {
			continue
		}
		var oob []byte
		if d.pktinf && m.dst.IsValid() {
			oob = d.woob[:putPktinfo(d.woob[:], m.dst)]
		}
		if _, _, err := d.conn.WriteMsgUDPAddrPort(m.out, oob, m.peer); err != nil {
			last = err
		}
	}
	return last
}

// start serves every socket of the set.
func (set *udpSet) start() {
	for _, u := range set.socks {
		set.loops.Add(1)
		go u.serve(set.stopping)
	}
}

// shutdown stops reading (the reads in progress end at once), waits for
// the queries being served, bounded by ctx, and closes the sockets. The
// caller has set stopping.
func (set *udpSet) shutdown(ctx context.Context) error {
	for _, u := range set.socks {
		_ = u.conn.SetReadDeadline(aLongTimeAgo)
	}
	done := make(chan struct{})
	go func() {
		set.loops.Wait()
		set.inflight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	for _, u := range set.socks {
		u.conn.Close()
	}
	return err
}

// close releases sockets bound by a Start that failed.
func (set *udpSet) close() {
	for _, u := range set.socks {
		u.conn.Close()
	}
}
