package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// upstream is one upstream server: its health and its idle connections.
type upstream struct {
	name string // "ip:port"
	// tls is the config of an upstream asked over TLS (nil: plain DNS);
	// it is asked over TCP only, never pipelined.
	tls *tls.Config
	// mark is the loop marker of the queries sent to it: the Forwarder's
	// marker and a random tag of this upstream, which names it when a
	// query comes back.
	mark []byte
	// fails counts the health probes failed in a row; MaxFails of them
	// mark it down. A failed query only sets suspect: it asks for a
	// health probe, which decides.
	fails   atomic.Int32
	down    atomic.Bool
	suspect atomic.Bool
	// looping: its loop probe came back without our marker (a resolver on
	// the way dropped it): not used until the list changes.
	looping atomic.Bool
	// loopSeen: a query sent to it came back (counted once).
	loopSeen atomic.Bool
	udp      pool
	tcp      pool
	logged   rateLimit
	loopLog  rateLimit
	// The loop probes' schedule, read and written by the background work
	// only: checked once a probe got a reply; until then the next probe is
	// due at probeAt, gap after the last one.
	checked bool
	probeAt time.Time
	gap     time.Duration
}

// pool holds the idle connections to one upstream over one transport,
// most recently used last, and with Config.Pipeline the pipelined TCP
// connections.
type pool struct {
	mu     sync.Mutex
	idle   []idleConn
	closed bool
	pipe   pipeline
}

type idleConn struct {
	c  *dns.Conn
	at time.Time
}

// get returns an idle connection used within expire, closing older ones.
func (p *pool) get(expire time.Duration) *dns.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		ic := p.idle[n-1]
		p.idle[n-1] = idleConn{}
		p.idle = p.idle[:n-1]
		if time.Since(ic.at) < expire {
			return ic.c
		}
		ic.c.Close()
	}
	return nil
}

// put keeps c for reuse, or closes it when the pool is full or closed.
func (p *pool) put(c *dns.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdle {
		c.Close()
		return
	}
	p.idle = append(p.idle, idleConn{c: c, at: time.Now()})
}

// expire closes the connections idle for expire or more.
func (p *pool) expire(expire time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(p.idle) && time.Since(p.idle[n].at) >= expire {
		p.idle[n].c.Close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
}

// close closes every idle connection; later ones are closed when released.
func (p *pool) close() {
	p.pipe.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ic := range p.idle {
		ic.c.Close()
	}
	p.idle, p.closed = nil, true
}

// idleCount is the number of idle connections (tests).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// dial connects to u: over TLS when u.tls is set (the handshake within
// ctx), else over TCP or UDP.
func dial(ctx context.Context, u *upstream, tcp bool) (net.Conn, error) {
	if u.tls != nil {
		d := tls.Dialer{Config: u.tls}
		return d.DialContext(ctx, "tcp", u.name)
	}
	var d net.Dialer
	if tcp {
		return d.DialContext(ctx, "tcp", u.name)
	}
	return d.DialContext(ctx, "udp", u.name)
}

// key tells u from an upstream of the same address over the other
// transport.
func (u *upstream) key() string {
	if u.tls != nil {
		return TLSPrefix + u.name
	}
	return u.name
}

// errTruncated: the UDP reply had TC set, did not fit dnsmsg.EDNSSize or
// did not parse; the query is asked again over TCP.
var errTruncated = errors.New("truncated reply")

// query sends m to u over one transport and returns the reply whose ID and
// question match, reading past others until ctx's deadline. A pooled
// connection is used when there is one; when the upstream had closed it
// (a TCP server ends connections after so many queries, often all the
// pooled ones at about the same time), the query is asked once more on a
// connection dialled for it, never on another pooled one. With
// Config.Pipeline a TCP query is pipelined instead (pipelined).
func (f *Forwarder) query(ctx context.Context, u *upstream, m *dns.Msg, tcp bool) (*dns.Msg, error) {
	if tcp && f.cfg.Pipeline && u.tls == nil {
		if r, err, ok := f.pipelined(ctx, u, m); ok {
			return r, err
		}
	}
	r, err, reused := f.queryOnce(ctx, u, m, tcp, false)
	if err != nil && reused && tcp && ctx.Err() == nil && staleConn(err) {
		r, err, _ = f.queryOnce(ctx, u, m, tcp, true)
	}
	return r, err
}

// staleConn reports whether err is what a reused connection the peer closed
// gives.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// queryOnce is one exchange, on a pooled connection unless fresh.
func (f *Forwarder) queryOnce(ctx context.Context, u *upstream, m *dns.Msg, tcp, fresh bool) (r *dns.Msg, err error, reused bool) {
	tcp = tcp || u.tls != nil
	proto, p := "udp", &u.udp
	switch {
	case u.tls != nil:
		proto, p = "tcp-tls", &u.tcp
	case tcp:
		proto, p = "tcp", &u.tcp
	}
	// A UDP query gets a socket of its own, on a fresh random source port
	// (RFC 5452 §9.2): a spoofer must guess the port as well as the ID.
	// MaxConcurrent bounds the sockets open at once.
	fresh = fresh || !tcp
	var c *dns.Conn
	if !fresh {
		c = p.get(f.cfg.Expire)
	}
	if c != nil {
		reused = true
		f.m.cacheHits.WithLabelValues(u.name, proto).Inc()
	} else {
		f.m.cacheMisses.WithLabelValues(u.name, proto).Inc()
		nc, err := dial(ctx, u, tcp)
		if err != nil {
			return nil, err, false
		}
		c = &dns.Conn{Conn: nc, UDPSize: dnsmsg.EDNSSize + 1}
	}
	keep := false
	defer func() {
		if keep && tcp {
			p.put(c)
		} else {
			c.Close()
		}
	}()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(f.cfg.Timeout)
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err, reused
	}
	// The client going away ends the read at once.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	f.m.requests.WithLabelValues(u.name).Inc()
	start := time.Now()
	if err := c.WriteMsg(m); err != nil {
		return nil, err, reused
	}
	var buf []byte
	if !tcp {
		buf = make([]byte, dnsmsg.EDNSSize+1)
	}
	for {
		var b []byte
		if tcp {
			b, err = c.ReadMsgHeader(nil)
		} else {
			var n int
			n, err = c.Read(buf)
			b = buf[:n]
		}
		if err != nil {
			if errors.Is(err, dns.ErrShortRead) {
				f.m.badReplies.WithLabelValues(u.name).Inc()
				continue
			}
			if cerr := ctx.Err(); cerr != nil {
				err = fmt.Errorf("%w (%w)", cerr, err)
			}
			return nil, err, reused
		}
		if len(b) < 12 || b[0] != byte(m.Id>>8) || b[1] != byte(m.Id) {
			// A late reply to an earlier query on this socket, or noise.
			f.m.badReplies.WithLabelValues(u.name).Inc()
			continue
		}
		if !tcp && len(b) > dnsmsg.EDNSSize {
			// Bigger than we advertised: the kernel cut it.
			keep = stop()
			return nil, errTruncated, reused
		}
		r = new(dns.Msg)
		if err := r.Unpack(b); err != nil {
			if !tcp {
				keep = stop()
				return nil, errTruncated, reused
			}
			return nil, fmt.Errorf("reply does not parse: %w", err), reused
		}
		if !sameQuestion(r, m) {
			f.m.badReplies.WithLabelValues(u.name).Inc()
			continue
		}
		// A stopped AfterFunc has not moved the deadline: the connection
		// is still good.
		keep = stop()
		rcode := rcodeName(r.Rcode)
		f.m.duration.WithLabelValues(u.name, rcode).Observe(time.Since(start).Seconds())
		if !tcp && r.Truncated {
			return nil, errTruncated, reused
		}
		f.m.responses.WithLabelValues(u.name, rcode).Inc()
		return r, nil, reused
	}
}

// sameQuestion reports whether the reply r answers the question of m,
// strictly: a response of m's opcode whose question section is m's, the
// name byte for byte (RFC 5452 §9.1; an upstream echoes the name as asked).
// A reply without the question is not taken: a spoofer who guessed the ID
// and port would need nothing more to fail the query.
func sameQuestion(r, m *dns.Msg) bool {
	if !r.Response || r.Opcode != m.Opcode || len(r.Question) != len(m.Question) || len(m.Question) == 0 {
		return false
	}
	for i, a := range r.Question {
		if a != m.Question[i] {
			return false
		}
	}
	return true
}

// rateLimit lets one log line through per interval and counts the others.
type rateLimit struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log at now, and how many lines were suppressed
// since the last one.
func (l *rateLimit) allow(now time.Time, every time.Duration) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}
