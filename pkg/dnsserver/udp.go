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
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/reuseport"
	"github.com/dnsconfigurer/dnsconfigurer/internal/udpbatch"
)

// headerSize is a DNS header's; a shorter datagram is dropped unanswered,
// as miekg/dns drops it.
const headerSize = 12

// udpSocket is one of the UDP sockets of a listen address and the
// goroutine that reads it: it answers from the wire form what the handler
// answers so, writes those replies as a batch, and hands every other
// datagram to another goroutine (udpSet.dispatch), where miekg/dns unpacks
// it and the handler serves it.
type udpSocket struct {
	conn *udpbatch.Conn
	g    *guard
	lh   listenHandler
	set  *udpSet
	// Tests: the datagrams of a header or more read (how the kernel spread
	// them), and the reads that returned any.
	read, batches atomic.Uint64
	// drain is set once shutdown detached the socket: its reader reads
	// until nothing is queued.
	drain atomic.Bool
}

// udpSet are the UDP sockets of one Start and the goroutines serving
// them.
type udpSet struct {
	socks    []*udpSocket
	loops    sync.WaitGroup // the reading goroutines
	inflight sync.WaitGroup // the queries being served by ServeDNS
	log      *slog.Logger
	stopping *atomic.Bool
	// work serves each datagram at once; closed once the reading
	// goroutines are done.
	work *workers[udpJob]
}

// udpJob is one datagram for ServeDNS and the writer of its reply.
type udpJob struct {
	u *udpSocket
	w *udpResponse
	q []byte
}

// dispatch serves j at once: a datagram never waits for another.
func (set *udpSet) dispatch(j udpJob) {
	set.inflight.Add(1)
	set.work.run(j)
}

// serve serves j (workers' function).
func (set *udpSet) serve(j udpJob) {
	j.u.serveQuery(j.w, j.q)
	set.inflight.Done()
}

// newUDPSocket prepares conn to be served (one datagram at a time with
// perDatagram).
func newUDPSocket(conn *net.UDPConn, g *guard, lh listenHandler, set *udpSet, perDatagram bool) (*udpSocket, error) {
	bc, err := udpbatch.New(conn, readBuffer, perDatagram)
	if err != nil {
		return nil, err
	}
	return &udpSocket{conn: bc, g: g, lh: lh, set: set}, nil
}

// serve reads the socket until it is closed or the server stops.
func (u *udpSocket) serve(stopping *atomic.Bool) {
	defer u.set.loops.Done()
	for {
		ms, err := u.conn.Read()
		if err != nil {
			if u.drain.Load() && reuseport.Pending(u.conn.UDPConn()) {
				// Detached (shutdown): read what it had queued.
				_ = u.conn.UDPConn().SetReadDeadline(time.Now().Add(time.Second))
				continue
			}
			if stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			var t interface{ Temporary() bool }
			if errors.As(err, &t) && t.Temporary() {
				continue
			}
			u.set.log.Error("dns server stopped", "err", err)
			return
		}
		if u.drain.Load() {
			// The next read only takes what is still queued.
			_ = u.conn.UDPConn().SetReadDeadline(aLongTimeAgo)
		}
		u.handle(ms)
	}
}

// handle serves one batch: the wire answers first, as they are found,
// then the handler's other datagrams are handed to goroutines, then the
// wire replies leave together.
func (u *udpSocket) handle(ms []udpbatch.Msg) {
	h := *u.g.handler.Load() // the handler current once the batch is read (SetHandler)
	wa, wire := h.(WireAnswerer)
	var start = u.g.req.now()
	u.batches.Add(1) // before any answer leaves (tests count them)
	var replies uint64
	for i := range ms {
		m := &ms[i]
		m.Reply = false
		if len(m.Buf) < headerSize {
			continue
		}
		if wire && u.answer(wa, m) {
			// Counted before the reply leaves, as ServeDNS's.
			u.g.req.wire(m.Buf, m.Out, addrFamily(m.Peer.Addr()), start)
			m.Reply = true
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
	if err := u.conn.Write(ms); err != nil {
		u.set.log.Debug("write reply", "err", err)
	}
	for i := range ms {
		keepReply(&ms[i])
	}
}

// serveDNS serves m's datagram on a goroutine other than the reading one,
// as miekg/dns does (dispatch): the datagram is copied, since its buffer
// is read into again.
func (u *udpSocket) serveDNS(m *udpbatch.Msg) {
	q := append(make([]byte, 0, len(m.Buf)), m.Buf...)
	peer := net.UDPAddrFromAddrPort(m.Peer)
	if z := m.Zone(); z != "" && peer.Zone == "" {
		peer.Zone = z
	}
	u.set.dispatch(udpJob{u: u, w: &udpResponse{u: u, peer: peer, dst: m.Dst}, q: q})
}

// serveQuery serves one UDP datagram of at least a header, as miekg/dns's
// Server.serveDNS (acceptQuery).
func (u *udpSocket) serveQuery(w *udpResponse, q []byte) {
	switch req, reply := acceptQuery(q); {
	case req != nil:
		u.lh.ServeDNS(w, req)
	case reply != nil:
		_ = w.WriteMsg(reply)
	}
}

// acceptQuery is miekg/dns's Server.serveDNS for a message q of at least
// a header, with its default MsgAcceptFunc, up to the handler: it returns
// the query to serve, or the reply to write, or neither. A response is
// ignored (neither); an opcode other than QUERY and NOTIFY gets NOTIMP; a
// query with other than one question, more than one answer or authority
// record or more than two additional records, or that does not unpack,
// gets FORMERR with its header (and its question, when that unpacked).
// Those replies are written directly, as miekg/dns writes them: neither
// the handler nor the metrics see them.
func acceptQuery(q []byte) (req, reply *dns.Msg) {
	dh := dns.Header{Id: binary.BigEndian.Uint16(q), Bits: binary.BigEndian.Uint16(q[2:]),
		Qdcount: binary.BigEndian.Uint16(q[4:]), Ancount: binary.BigEndian.Uint16(q[6:]),
		Nscount: binary.BigEndian.Uint16(q[8:]), Arcount: binary.BigEndian.Uint16(q[10:])}
	req = new(dns.Msg)
	action := dns.DefaultMsgAcceptFunc(dh)
	switch action {
	case dns.MsgAccept:
		if err := req.Unpack(q); err == nil {
			return req, nil
		}
		action = dns.MsgReject
	case dns.MsgIgnore:
		return nil, nil
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
	return nil, req
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

func (w *udpResponse) LocalAddr() net.Addr  { return w.u.conn.UDPConn().LocalAddr() }
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
	return w.u.conn.WriteTo(b, w.peer, w.dst)
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

// start serves every socket of the set.
func (set *udpSet) start() {
	for _, u := range set.socks {
		set.loops.Add(1)
		go u.serve(set.stopping)
	}
}

// shutdown detaches the sockets and reads what they had queued, waits for
// the queries being served, bounded by ctx, and closes the sockets. The
// caller has set stopping.
func (set *udpSet) shutdown(ctx context.Context) error {
	// Detached, a socket gets no new datagram: a new instance sharing the
	// address (SO_REUSEPORT) gets them all. What it had queued is still
	// read and answered (serve); were it closed with them, those clients
	// would wait for a retry.
	for _, u := range set.socks {
		if err := reuseport.Detach(u.conn.UDPConn()); err != nil {
			set.log.Warn("stop: detach the UDP socket", "err", err)
		} else {
			u.drain.Store(true)
		}
		_ = u.conn.UDPConn().SetReadDeadline(aLongTimeAgo)
	}
	done := make(chan struct{})
	go func() {
		set.loops.Wait()
		set.work.close() // nothing sends any more: the waiting workers end
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
		u.conn.UDPConn().Close()
	}
	return err
}

// close releases sockets bound by a Start that failed.
func (set *udpSet) close() {
	for _, u := range set.socks {
		u.conn.UDPConn().Close()
	}
}
