package dnsserver

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/miekg/dns"
)

// The bounds of TCP pipelining (RFC 7766 6.2.1.1). They are constants,
// not settings, until a deployment needs another value.
const (
	// tcpPipelined bounds the queries of one connection answered at once.
	// At the bound the connection is not read until one is answered
	// (backpressure: the next queries wait in the socket buffers). A
	// forwarder keeping about 100 in flight per connection never waits.
	tcpPipelined = 128
	// tcpInFlight bounds the TCP queries answered at once, every
	// connection's. Each holds a goroutine and its message (at most
	// tcpMaxQuery bytes), about 12 KiB: 24 MiB at worst, as UDPInFlight.
	tcpInFlight = 2048
	// tcpInFlightPerClient bounds those of one client address: node-local
	// keeps up to its maxConcurrent (1000) in flight from one address.
	tcpInFlightPerClient = 1024
	// tcpReserve is the in-flight slots a client at or over its fair share
	// may not take: they are kept for the clients under theirs (tcpShare).
	tcpReserve = 256
	// tcpMaxQuery is the longest TCP query read, the UDP buffer's. The rest
	// of a longer one is discarded, and the cut query gets FORMERR, as a
	// cut datagram does.
	tcpMaxQuery = readBuffer
	// tcpLinger bounds how long a connection the server ends waits for its
	// client to close, after the server closed its side. Closing a socket
	// with unread queries sends a reset, which can discard replies still in
	// flight (net/http waits 500 ms too).
	tcpLinger = 500 * time.Millisecond
)

// tcpLimits are the pipelining bounds of a Server: the constants above,
// or a test's.
type tcpLimits struct{ pipelined, inFlight, perClient, reserve int }

func (l tcpLimits) orDefaults() tcpLimits {
	if l == (tcpLimits{}) {
		return tcpLimits{tcpPipelined, tcpInFlight, tcpInFlightPerClient, tcpReserve}
	}
	return l
}

// errStopped ends a connection's reads once it is closed or the server
// stops.
var errStopped = errors.New("dnsserver: connection stopped")

// tcpServer serves the TCP listeners of one Start. Each connection has a
// goroutine reading its queries, and each query one answering it (run),
// so the queries pipelined on a connection are answered concurrently and
// each reply leaves when ready (RFC 7766 6.2.1.1: in any order). Bounds:
// tcpSlots (connections), tcpPipelined (per connection) and tcpShare (per
// client and in total). miekg/dns answers one query of a connection at a
// time, and leaves a connection open after a message it cannot parse.
type tcpServer struct {
	g           *guard
	log         *slog.Logger
	slots       *tcpSlots
	share       *tcpShare
	first, idle time.Duration // read timeouts: the first query, the next ones
	write       time.Duration
	maxQueries  int
	pipelined   int // the queries of a connection answered at once
	listeners   []net.Listener
	handlers    []listenHandler // by listener
	stopping    atomic.Bool
	accepts     sync.WaitGroup
	connections sync.WaitGroup // the connections' reading goroutines
	// work answers each query at once; closed once every connection is
	// done.
	work *workers[tcpJob]
}

// tcpJob is one query and its connection.
type tcpJob struct {
	c   *tcpConn
	req *dns.Msg
}

// run answers j at once.
func (t *tcpServer) run(j tcpJob) { t.work.run(j) }

// start serves every listener.
func (t *tcpServer) start() {
	for i, ln := range t.listeners {
		t.accepts.Add(1)
		go t.accept(ln, t.handlers[i])
	}
}

// accept serves ln's connections until it is closed.
func (t *tcpServer) accept(ln net.Listener, lh listenHandler) {
	defer t.accepts.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if t.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors, say: wait a little (net/http's
				// backoff), as a full accept queue makes clients wait.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				tm := time.NewTimer(backoff)
				<-tm.C
				continue
			}
			t.log.Error("dns server stopped", "err", err)
			return
		}
		backoff = 0
		c := &tcpConn{Conn: nc, t: t, lh: lh, client: dnsmsg.ClientAddr(nc.RemoteAddr()),
			pipe: make(chan struct{}, t.pipelined), quit: make(chan struct{})}
		c.last.Store(time.Now().UnixNano())
		if !t.slots.admit(c) {
			continue
		}
		t.connections.Add(1)
		go c.serve()
	}
}

// shutdown stops accepting and reading, waits for the replies being
// answered, bounded by ctx, and closes every connection.
func (t *tcpServer) shutdown(ctx context.Context) error {
	t.stopping.Store(true)
	for _, ln := range t.listeners {
		ln.Close()
	}
	t.accepts.Wait()
	for _, c := range t.slots.open() {
		c.stopReading()
	}
	done := make(chan struct{})
	go func() {
		t.connections.Wait()
		t.work.close() // nothing sends any more: the waiting workers end
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range t.slots.open() {
			c.abort()
		}
		return ctx.Err()
	}
}

// close releases listeners bound by a Start that failed.
func (t *tcpServer) close() {
	for _, ln := range t.listeners {
		ln.Close()
	}
}

// tcpConn is one TCP connection holding a slot. Its replies are written
// one at a time, each within the write timeout; a write that fails resets
// the connection. Closing it frees its slot.
type tcpConn struct {
	net.Conn
	t      *tcpServer
	lh     listenHandler
	client netip.Addr
	last   atomic.Int64  // unix nanoseconds of the last query read or reply written
	pipe   chan struct{} // the queries being answered, at most pipelined
	answer sync.WaitGroup

	wmu   sync.Mutex // one writer at a time
	frame []byte     // the last reply written, framed (wmu)

	mu      sync.Mutex // the read deadline against stopReading
	stopped bool
	quit    chan struct{} // closed by stopReading
}

// serve reads the queries and hands each to a goroutine until the
// connection ends, then waits for the replies being answered. A message
// that does not parse closes the connection at once; any other end (the
// client's close, a timeout, tcpMaxQueries, the server's shutdown) lets
// the replies leave first.
func (c *tcpConn) serve() {
	defer c.t.connections.Done()
	orderly := c.read()
	if !orderly {
		c.abort()
	}
	c.answer.Wait()
	if orderly {
		c.linger()
	}
}

// read reads and dispatches queries; false after a message that does not
// parse.
func (c *tcpConn) read() (orderly bool) {
	t := c.t
	timeout := t.first
	for range t.maxQueries {
		q, err := c.readMsg(timeout)
		if err != nil {
			return true
		}
		timeout = t.idle
		if len(q) < headerSize {
			// miekg/dns would leave the client waiting, and the
			// connection would hold its slot for as long as junk comes.
			t.g.tcpMalformed.Add(1)
			return false
		}
		req, reply := acceptQuery(q)
		switch {
		case reply != nil:
			c.last.Store(time.Now().UnixNano())
			_ = (&tcpResponse{c: c}).WriteMsg(reply)
			continue
		case req == nil: // a response: nothing will answer it
			t.g.tcpMalformed.Add(1)
			return false
		}
		c.last.Store(time.Now().UnixNano())
		if !c.dispatch(req) {
			return true
		}
	}
	return true
}

// dispatch answers req on a goroutine of its own once the connection and
// its client have an in-flight slot for it, waiting (not reading) until
// they do; false when the connection stopped meanwhile.
func (c *tcpConn) dispatch(req *dns.Msg) bool {
	g := c.t.g
	waited := false
	select {
	case c.pipe <- struct{}{}:
	default:
		waited = true
		g.tcpWaited.Add(1)
		select {
		case c.pipe <- struct{}{}:
		case <-c.quit:
			return false
		}
	}
	if !c.t.share.acquire(c.client, c.quit, func() {
		if !waited {
			g.tcpWaited.Add(1)
		}
	}) {
		<-c.pipe
		return false
	}
	g.tcpInFlight.Add(1)
	c.answer.Add(1)
	c.t.run(tcpJob{c, req})
	return true
}

// serveQuery answers req and frees its slots.
func (c *tcpConn) serveQuery(req *dns.Msg) {
	w := tcpResponses.Get().(*tcpResponse)
	w.c = c
	defer func() {
		w.c = nil // the handler keeps no writer past ServeDNS (guard's are pooled too)
		tcpResponses.Put(w)
		c.t.share.release(c.client)
		c.t.g.tcpInFlight.Add(-1)
		<-c.pipe
		c.answer.Done()
	}()
	c.lh.ServeDNS(w, req)
}

var tcpResponses = sync.Pool{New: func() any { return new(tcpResponse) }}

// readMsg reads the next message, cut to tcpMaxQuery bytes. The whole
// message must come within timeout of the call, so a client sending it
// byte by byte, or never finishing it, holds the connection no longer. A
// connection with queries being answered is not idle (RFC 7766 6.2.3):
// while none of the next message has come, the timeout starts again.
func (c *tcpConn) readMsg(timeout time.Duration) ([]byte, error) {
	if err := c.readDeadline(timeout); err != nil {
		return nil, err
	}
	var length [2]byte
	for n := 0; n < len(length); {
		k, err := c.Conn.Read(length[n:])
		n += k
		if err == nil {
			continue
		}
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || len(c.pipe) == 0 {
			return nil, err
		}
		if err := c.readDeadline(timeout); err != nil {
			return nil, err
		}
	}
	l := int(binary.BigEndian.Uint16(length[:]))
	q := make([]byte, min(l, tcpMaxQuery))
	if _, err := io.ReadFull(c.Conn, q); err != nil {
		return nil, err
	}
	if l > len(q) {
		if _, err := io.CopyN(io.Discard, c.Conn, int64(l-len(q))); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// readDeadline sets the read deadline d from now, unless the connection
// stopped: stopReading's deadline in the past must stay.
func (c *tcpConn) readDeadline(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errStopped
	}
	return c.Conn.SetReadDeadline(time.Now().Add(d))
}

// stopReading ends the reads (the one in progress at once) and the waits
// for a slot; the replies being answered still leave.
func (c *tcpConn) stopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		close(c.quit)
		_ = c.Conn.SetReadDeadline(aLongTimeAgo)
	}
}

// close closes the connection at once and frees its slot.
func (c *tcpConn) close() {
	c.stopReading()
	c.Conn.Close()
	c.t.slots.release(c)
}

// abort closes the connection with a reset: what it has not sent is
// dropped, so a client that does not read holds no kernel buffers after
// it, and the client learns at once.
func (c *tcpConn) abort() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.close()
}

// linger closes the connection after its client did, or tcpLinger: the
// server's side is closed first, so that the replies written leave before
// a reset for queries not read can discard them.
func (c *tcpConn) linger() {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = c.Conn.SetReadDeadline(time.Now().Add(tcpLinger))
		_, _ = io.Copy(io.Discard, c.Conn)
	}
	c.close()
}

// writeReply writes one reply, framed, within the write timeout, and
// resets the connection when that fails (its reads end too).
func (c *tcpConn) writeReply(b []byte) (int, error) {
	if len(b) > dns.MaxMsgSize {
		return 0, errTooLarge
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	frame := binary.BigEndian.AppendUint16(c.frame[:0], uint16(len(b)))
	frame = append(frame, b...)
	if cap(frame) <= 2+readBuffer {
		c.frame = frame // kept for the next reply
	}
	now := time.Now()
	c.last.Store(now.UnixNano()) // before the client can see the reply
	err := c.Conn.SetWriteDeadline(now.Add(c.t.write))
	if err == nil {
		_, err = c.Conn.Write(frame)
	}
	if err != nil {
		c.abort()
		return 0, err
	}
	return len(b), nil
}

var errTooLarge = errors.New("dns: message too large")

// tcpResponse is the dns.ResponseWriter of one TCP query: the reply goes
// to the query's connection, framed, beside the replies to the other
// queries pipelined on it.
type tcpResponse struct {
	c *tcpConn
}

var _ dns.ResponseWriter = (*tcpResponse)(nil)

func (w *tcpResponse) LocalAddr() net.Addr  { return w.c.Conn.LocalAddr() }
func (w *tcpResponse) RemoteAddr() net.Addr { return w.c.Conn.RemoteAddr() }

func (w *tcpResponse) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (w *tcpResponse) Write(b []byte) (int, error) { return w.c.writeReply(b) }

// Close closes the connection at once, as miekg/dns's: the replies to
// the other queries on it are lost.
func (w *tcpResponse) Close() error {
	w.c.close()
	return nil
}

func (w *tcpResponse) TsigStatus() error   { return nil }
func (w *tcpResponse) TsigTimersOnly(bool) {}

// Hijack does nothing: the connection is shared by the queries pipelined
// on it, so no handler may take it over (none does).
func (w *tcpResponse) Hijack() {}
