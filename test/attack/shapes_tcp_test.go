package attack

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The TCP shapes hold, fill, feed junk to or churn a DNS server's TCP
// connections: the slots of its pool and of each client.

// tcpConns keeps n connections from a's addresses to addr, dialing again
// whenever one ends, and hands each to use until it returns. closed is
// closed once the server closes the connection (when drain reads it; nil
// otherwise). A dial takes a token of tokens (maxRate a second), which
// use shares for its writes.
func tcpConns(ctx context.Context, a *attack, addr string, n int, drain bool,
	use func(ctx context.Context, c net.Conn, closed <-chan struct{}, tokens <-chan struct{}, r *rand.Rand)) {
	tokens := pace(ctx, maxRate)
	dialEach(ctx, a, addr, n, tokens, func(c net.Conn, r *rand.Rand) {
		var closed chan struct{}
		if drain {
			closed = make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, c)
				close(closed)
			}()
		}
		use(ctx, c, closed, tokens, r)
		c.Close()
		if closed != nil {
			<-closed
		}
		if ctx.Err() == nil {
			a.st.closed.Add(1)
		}
	})
}

// dialEach runs n dialers from a's addresses to addr, each dialing once
// for each token of tokens it takes until ctx ends, and hands each
// connection to use, which closes it.
func dialEach(ctx context.Context, a *attack, addr string, n int, tokens <-chan struct{}, use func(c net.Conn, r *rand.Rand)) {
	var wg sync.WaitGroup
	for i := range n {
		src, r := a.from[i%len(a.from)], a.rand(i)
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 2 * time.Second}
			for take(ctx, tokens) {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					a.st.failed.Add(1)
					continue
				}
				a.st.dials.Add(1)
				use(c, r)
			}
		})
	}
	wg.Wait()
}

// every writes next() to c at once, then every d (each write after the
// first taking a token) until ctx ends, c is closed or a write fails; a
// nil next stops the writes and waits for the end.
func every(ctx context.Context, a *attack, c net.Conn, closed, tokens <-chan struct{}, d time.Duration, next func() []byte) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first && !take(ctx, tokens) {
			return
		}
		b := next()
		if b == nil {
			break
		}
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write(b); err != nil {
			return
		}
		a.st.sent.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-closed:
			return
		case <-tick.C:
		}
	}
	select {
	case <-ctx.Done():
	case <-closed:
	}
}

// framed is a DNS message with its TCP length prefix.
func framed(msg []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)
}

// packed is a query for name of qtype with a random id.
func packed(r *rand.Rand, name string, qtype uint16) []byte {
	m := new(dns.Msg).SetQuestion(name, qtype)
	m.Id = uint16(r.Uint32())
	b, err := m.Pack()
	if err != nil {
		panic(fmt.Sprintf("pack %s: %v", name, err))
	}
	return b
}

// period draws a per-connection interval for conns connections that
// keeps them within maxRate messages a second.
func period(r *rand.Rand, conns int) time.Duration {
	floor := time.Duration(conns) * time.Second / maxRate
	return max(floor, time.Duration(between(r, 500, 8000))*time.Millisecond)
}

// tcpJunk: connections that send messages that do not parse, every
// period: a 4-byte "header", a zero length, a header alone, random bytes.
type tcpJunk struct {
	to     target
	conns  int
	every  time.Duration
	kind   string
	maxLen int
}

func drawTCPJunk(r *rand.Rand) params {
	n := between(r, 20, 400)
	return tcpJunk{to: drawTarget(r), conns: n, every: period(r, n),
		kind: pick(r, "short-header", "zero-length", "header-only", "random", "mixed"), maxLen: between(r, 1, 512)}
}

func (p tcpJunk) String() string {
	return fmt.Sprintf("%s, %d connections, a %s message every %v (random: up to %d bytes)", p.to, p.conns, p.kind, p.every, p.maxLen)
}

func (p tcpJunk) run(ctx context.Context, e *env, a *attack) {
	tcpConns(ctx, a, e.addr(p.to), p.conns, true, func(ctx context.Context, c net.Conn, closed, tokens <-chan struct{}, r *rand.Rand) {
		every(ctx, a, c, closed, tokens, p.every, func() []byte { return junk(r, p.kind, p.maxLen) })
	})
}

// junk is one message of kind that does not parse as a query.
func junk(r *rand.Rand, kind string, maxLen int) []byte {
	if kind == "mixed" {
		kind = pick(r, "short-header", "zero-length", "header-only", "random")
	}
	switch kind {
	case "short-header":
		return framed([]byte{byte(r.Uint32()), byte(r.Uint32()), 0, 0})
	case "zero-length":
		return []byte{0, 0}
	case "header-only": // one question announced, none sent
		h := binary.BigEndian.AppendUint16(nil, uint16(r.Uint32()))
		return framed(append(h, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0))
	}
	b := make([]byte, 1+r.IntN(maxLen))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return framed(b)
}

// tcpPartial: connections that announce a length and dribble the bytes
// of the message, never its last one.
type tcpPartial struct {
	to       target
	conns    int
	announce int
	chunk    int // bytes a dribble; 0: the length prefix only
	every    time.Duration
}

func drawTCPPartial(r *rand.Rand) params {
	n := between(r, 20, 400)
	p := tcpPartial{to: drawTarget(r), conns: n, announce: between(r, 12, 65535), chunk: between(r, 1, 8), every: period(r, n)}
	if r.IntN(4) == 0 {
		p.chunk = 0
	}
	return p
}

func (p tcpPartial) String() string {
	return fmt.Sprintf("%s, %d connections, announce %d bytes, then %d every %v", p.to, p.conns, p.announce, p.chunk, p.every)
}

func (p tcpPartial) run(ctx context.Context, e *env, a *attack) {
	tcpConns(ctx, a, e.addr(p.to), p.conns, true, func(ctx context.Context, c net.Conn, closed, tokens <-chan struct{}, r *rand.Rand) {
		sent := -1
		every(ctx, a, c, closed, tokens, p.every, func() []byte {
			if sent < 0 {
				sent = 0
				return binary.BigEndian.AppendUint16(nil, uint16(p.announce))
			}
			n := min(p.chunk, p.announce-1-sent)
			if n <= 0 {
				return nil
			}
			sent += n
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		})
	})
}

// tcpHeld: connections held idle, after one query or none.
type tcpHeld struct {
	to    target
	conns int
	first bool // ask one cluster name first
}

func drawTCPHeld(r *rand.Rand) params {
	return tcpHeld{to: drawTarget(r), conns: between(r, 20, 400), first: r.IntN(2) == 0}
}

func (p tcpHeld) String() string {
	return fmt.Sprintf("%s, %d idle connections (a query first: %v)", p.to, p.conns, p.first)
}

func (p tcpHeld) run(ctx context.Context, e *env, a *attack) {
	tcpConns(ctx, a, e.addr(p.to), p.conns, true, func(ctx context.Context, c net.Conn, closed, tokens <-chan struct{}, r *rand.Rand) {
		done := !p.first
		every(ctx, a, c, closed, tokens, time.Hour, func() []byte {
			if done {
				return nil
			}
			done = true
			return framed(packed(r, clusterName(r), dns.TypeA))
		})
	})
}

// tcpChurn: connections opened and closed in a loop: closed at once, after
// a query not waited for, after one byte, or reset.
type tcpChurn struct {
	to   target
	rate int
	how  string
}

func drawTCPChurn(r *rand.Rand) params {
	return tcpChurn{to: drawTarget(r), rate: between(r, 20, maxRate), how: pick(r, "close", "query-close", "byte-close", "reset")}
}

func (p tcpChurn) String() string {
	return fmt.Sprintf("%s, %d connections a second, %s", p.to, p.rate, p.how)
}

func (p tcpChurn) run(ctx context.Context, e *env, a *attack) {
	dialEach(ctx, a, e.addr(p.to), 8, pace(ctx, p.rate), func(c net.Conn, r *rand.Rand) {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		switch p.how {
		case "query-close":
			_, _ = c.Write(framed(packed(r, clusterName(r), dns.TypeA)))
		case "byte-close":
			_, _ = c.Write([]byte{0})
		case "reset":
			_ = c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
		a.st.sent.Add(1)
	})
}

// tcpPipeline: one to four connections, each a stream of queries written
// back to back at the attack's rate, their replies read or never read.
type tcpPipeline struct {
	to    target
	conns int
	rate  int
	names string
	read  bool
}

func drawTCPPipeline(r *rand.Rand) params {
	return tcpPipeline{to: drawTarget(r), conns: between(r, 1, 4), rate: between(r, 20, maxRate),
		names: pick(r, "cluster", "silent", "missing", "mixed"), read: r.IntN(3) > 0}
}

func (p tcpPipeline) String() string {
	return fmt.Sprintf("%s, %d connections, %d queries a second in all, %s names, replies read: %v", p.to, p.conns, p.rate, p.names, p.read)
}

func (p tcpPipeline) run(ctx context.Context, e *env, a *attack) {
	domains := silentDomains(a.rand(-1), 8)
	tcpConns(ctx, a, e.addr(p.to), p.conns, p.read, func(ctx context.Context, c net.Conn, closed, tokens <-chan struct{}, r *rand.Rand) {
		every(ctx, a, c, closed, tokens, time.Second*time.Duration(p.conns)/time.Duration(p.rate), func() []byte {
			return framed(packed(r, someName(r, p.names, domains), dns.TypeA))
		})
	})
}
