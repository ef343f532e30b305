package forward

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// pipelineDepth bounds the queries in flight on one pipelined TCP
// connection; a query that finds every connection this full dials a new
// one. MaxConcurrent (1000) then needs at most 10 connections per
// upstream, and an upstream closing one fails at most this many queries.
const pipelineDepth = 100

var (
	// errPipeClosed: the pipeline was closed; the query goes over a
	// connection of its own, as without pooling.
	errPipeClosed = errors.New("forward: pipelined connections closed")
	// errConnIdle ends a connection idle for Config.Expire.
	errConnIdle = errors.New("forward: pipelined connection idle")
)

// pipeline holds the pipelined TCP connections to one upstream
// (Config.Pipeline): many queries in flight on each, replies matched by
// ID and question, in any order (RFC 7766 §6.2.1.1).
type pipeline struct {
	mu     sync.Mutex
	conns  []*pipeConn // dialling or open, not ended
	seq    uint64      // the last connection's number
	closed bool        // no new connection; busy ones end when idle
}

// pipeConn is one pipelined connection. Its goroutine dials it, then reads
// the replies and hands each to the waiter of its ID.
type pipeConn struct {
	seq    uint64
	expire time.Duration
	ready  chan struct{} // closed once dialled
	dead   chan struct{} // closed when it ends; err says why
	gone   chan struct{} // closed when its goroutine has returned
	wmu    chan struct{} // one writer at a time
	cancel context.CancelFunc

	// Under pipeline.mu. c is set once, before ready is closed.
	c       *dns.Conn
	waiting map[uint16]*waiter // by the ID on this connection
	err     error
	lastSeq uint64 // the newest connection's number when it ended
	idleAt  time.Time
	idle    *time.Timer
}

// waiter is a query waiting for its reply.
type waiter struct {
	q     *dns.Msg
	reply chan reply // buffered: the reader never blocks
}

type reply struct {
	r   *dns.Msg
	err error
}

// pipeOpts is what a new connection needs from the Forwarder.
type pipeOpts struct {
	addr    string
	timeout time.Duration // bounds the dial
	expire  time.Duration
	m       *metrics // counts the replies dropped
}

// take registers q on the least-loaded connection with room numbered
// after after, under a random ID free on it; it dials a new connection
// when none has room. hit: the connection existed.
func (p *pipeline) take(q *dns.Msg, after uint64, o pipeOpts) (pc *pipeConn, id uint16, w *waiter, hit bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, 0, nil, false, errPipeClosed
	}
	for _, c := range p.conns {
		if c.seq > after && len(c.waiting) < pipelineDepth && (pc == nil || len(c.waiting) < len(pc.waiting)) {
			pc = c
		}
	}
	hit = pc != nil
	if pc == nil {
		pc = p.dialLocked(o)
	}
	for {
		id = uint16(rand.Uint32())
		if _, used := pc.waiting[id]; !used {
			break
		}
	}
	w = &waiter{q: q, reply: make(chan reply, 1)}
	pc.waiting[id] = w
	return pc, id, w, hit, nil
}

// dialLocked adds a connection and starts its goroutine; p.mu is held.
func (p *pipeline) dialLocked(o pipeOpts) *pipeConn {
	p.seq++
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	pc := &pipeConn{
		seq: p.seq, expire: o.expire, cancel: cancel,
		ready: make(chan struct{}), dead: make(chan struct{}), gone: make(chan struct{}), wmu: make(chan struct{}, 1),
		waiting: map[uint16]*waiter{},
	}
	p.conns = append(p.conns, pc)
	go p.run(ctx, pc, o)
	return pc
}

// run dials pc, then reads its replies until it ends.
func (p *pipeline) run(ctx context.Context, pc *pipeConn, o pipeOpts) {
	defer close(pc.gone)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", o.addr)
	pc.cancel()
	if err != nil {
		p.end(pc, err)
		return
	}
	c := &dns.Conn{Conn: nc}
	p.mu.Lock()
	ended := pc.err != nil
	if !ended {
		pc.c = c
	}
	p.mu.Unlock()
	if ended {
		nc.Close()
		return
	}
	close(pc.ready)
	for {
		b, err := c.ReadMsgHeader(nil)
		if errors.Is(err, dns.ErrShortRead) {
			o.m.badReplies.WithLabelValues(o.addr).Inc()
			continue
		}
		if err != nil {
			p.end(pc, err)
			return
		}
		p.mu.Lock()
		w := pc.waiting[uint16(b[0])<<8|uint16(b[1])]
		p.mu.Unlock()
		if w == nil {
			// Late, or its waiter has gone.
			o.m.badReplies.WithLabelValues(o.addr).Inc()
			continue
		}
		r := new(dns.Msg)
		if err := r.Unpack(b); err != nil {
			w.deliver(reply{err: fmt.Errorf("reply does not parse: %w", err)})
			continue
		}
		if !sameQuestion(r, w.q) || !w.deliver(reply{r: r}) {
			o.m.badReplies.WithLabelValues(o.addr).Inc()
		}
	}
}

// deliver hands rep to w unless it already has a reply.
func (w *waiter) deliver(rep reply) bool {
	select {
	case w.reply <- rep:
		return true
	default:
		return false
	}
}

// write sends the query wire on pc, one writer at a time, by deadline. A
// write cut short leaves the stream out of step: pc ends.
func (p *pipeline) write(ctx context.Context, pc *pipeConn, wire []byte, deadline time.Time) error {
	select {
	case pc.wmu <- struct{}{}:
	case <-pc.dead:
		return pc.err
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-pc.wmu }()
	if err := pc.c.SetWriteDeadline(deadline); err != nil {
		p.end(pc, err)
		return err
	}
	n, err := pc.c.Write(wire)
	if err != nil && (n > 0 || !errors.Is(err, os.ErrDeadlineExceeded)) {
		p.end(pc, err)
	}
	return err
}

// release frees w's ID on pc. An idle connection ends after its expire,
// or at once when the pipeline is closed.
func (p *pipeline) release(pc *pipeConn, id uint16, w *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.waiting[id] == w {
		delete(pc.waiting, id)
	}
	if pc.err != nil || len(pc.waiting) > 0 {
		return
	}
	if p.closed {
		p.endLocked(pc, errPipeClosed)
		return
	}
	pc.idleAt = time.Now()
	if pc.idle == nil {
		pc.idle = time.AfterFunc(pc.expire, func() { p.expireIdle(pc) })
	} else {
		pc.idle.Reset(pc.expire)
	}
}

// expireIdle ends pc if it has been idle for its expire.
func (p *pipeline) expireIdle(pc *pipeConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(pc.waiting) == 0 && time.Since(pc.idleAt) >= pc.expire {
		p.endLocked(pc, errConnIdle)
	}
}

func (p *pipeline) end(pc *pipeConn, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked(pc, cause)
}

// endLocked ends pc for cause, the first one kept: its waiters fail at
// once, its goroutine returns. p.mu is held.
func (p *pipeline) endLocked(pc *pipeConn, cause error) {
	if pc.err != nil {
		return
	}
	pc.err, pc.lastSeq = cause, p.seq
	p.conns = slices.DeleteFunc(p.conns, func(c *pipeConn) bool { return c == pc })
	if pc.idle != nil {
		pc.idle.Stop()
	}
	close(pc.dead)
	pc.cancel()
	if pc.c != nil {
		pc.c.Close()
	}
}

// close ends the idle connections and waits for their goroutines; a busy
// one ends when its last query does. Later queries are not pipelined.
func (p *pipeline) close() {
	p.mu.Lock()
	p.closed = true
	var gone []chan struct{}
	for _, pc := range slices.Clone(p.conns) {
		if len(pc.waiting) == 0 {
			p.endLocked(pc, errPipeClosed)
			gone = append(gone, pc.gone)
		}
	}
	p.mu.Unlock()
	for _, g := range gone {
		<-g
	}
}

// count is the number of connections dialling or open (tests).
func (p *pipeline) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// pipelined sends m to u on a pipelined connection. A query on an
// existing connection that the upstream closed (staleConn) is asked once
// more, on a connection dialled after that one ended: the queries it
// failed share one, never one that may be as stale. ok is false once the
// pipeline is closed: the caller asks on a connection of its own.
func (f *Forwarder) pipelined(ctx context.Context, u *upstream, m *dns.Msg) (r *dns.Msg, err error, ok bool) {
	r, err, reused, after := f.pipeOnce(ctx, u, m, 0)
	if err != nil && reused && ctx.Err() == nil && staleConn(err) {
		r, err, _, _ = f.pipeOnce(ctx, u, m, after)
	}
	if errors.Is(err, errPipeClosed) {
		return nil, nil, false
	}
	return r, err, true
}

// pipeOnce is one exchange on a connection numbered after after. When it
// fails, retryAfter is for a retry: the number of the newest connection
// when the one taken ended. It records queryOnce's metrics: a cache hit is
// a query on a connection that existed (dialling or open), a miss one
// that dialled it.
func (f *Forwarder) pipeOnce(ctx context.Context, u *upstream, m *dns.Msg, after uint64) (r *dns.Msg, err error, hit bool, retryAfter uint64) {
	wire, err := m.Pack()
	if err != nil {
		return nil, err, false, 0
	}
	p := &u.tcp.pipe
	pc, id, w, hit, err := p.take(m, after, pipeOpts{addr: u.name, timeout: f.cfg.Timeout, expire: f.cfg.Expire, m: f.m})
	if err != nil {
		return nil, err, false, 0
	}
	if hit {
		f.m.cacheHits.WithLabelValues(u.name, "tcp").Inc()
	} else {
		f.m.cacheMisses.WithLabelValues(u.name, "tcp").Inc()
	}
	r, err = f.await(ctx, u, p, pc, id, w, wire)
	if err != nil {
		p.mu.Lock()
		retryAfter = pc.lastSeq
		p.mu.Unlock()
	}
	return r, err, hit, retryAfter
}

// await writes wire on pc under id and waits for w's reply.
func (f *Forwarder) await(ctx context.Context, u *upstream, p *pipeline, pc *pipeConn, id uint16, w *waiter, wire []byte) (*dns.Msg, error) {
	defer p.release(pc, id, w)
	select {
	case <-pc.ready:
	case <-pc.dead:
		return nil, pc.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(f.cfg.Timeout)
	}
	wire[0], wire[1] = byte(id>>8), byte(id)
	f.m.requests.WithLabelValues(u.name).Inc()
	start := time.Now()
	if err := p.write(ctx, pc, wire, deadline); err != nil {
		return nil, err
	}
	var rep reply
	select {
	case rep = <-w.reply:
	case <-pc.dead:
		// A reply read just before the end is still taken.
		select {
		case rep = <-w.reply:
		default:
			return nil, pc.err
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rep.err != nil {
		return nil, rep.err
	}
	rcode := rcodeName(rep.r.Rcode)
	f.m.duration.WithLabelValues(u.name, rcode).Observe(time.Since(start).Seconds())
	f.m.responses.WithLabelValues(u.name, rcode).Inc()
	return rep.r, nil
}
