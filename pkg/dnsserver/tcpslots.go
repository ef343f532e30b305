package dnsserver

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// tcpSlots are the TCP connections of a Server, every listener's: at most
// max open at once, and at most perClient from one client address. When
// every slot is taken, a newcomer takes the slot of an idle connection
// (one waiting for its next query) of the client holding the most, and
// that connection is closed: RFC 7766 6.2.3 lets a server close idle
// connections under pressure, and the client reconnects. So a client
// holding hundreds of quiet connections gives way to every other client,
// node-local's included. Only when no connection is idle is the newcomer
// closed at once.
type tcpSlots struct {
	g         *guard
	max       int
	perClient int

	mu       sync.Mutex
	conns    map[*tcpConn]struct{}
	byClient map[netip.Addr]int
}

func newTCPSlots(g *guard, maxConns, perClient int) *tcpSlots {
	return &tcpSlots{g: g, max: maxConns, perClient: min(max(perClient, 1), maxConns),
		conns: make(map[*tcpConn]struct{}), byClient: make(map[netip.Addr]int)}
}

// admit returns c as a tcpConn holding a slot, or closes c and returns
// nil when it gets none.
func (s *tcpSlots) admit(c net.Conn, l *tcpListener) *tcpConn {
	client := clientAddr(c.RemoteAddr())
	s.mu.Lock()
	if s.byClient[client] >= s.perClient {
		s.mu.Unlock()
		s.g.tcpClientLimited.Add(1)
		c.Close()
		return nil
	}
	var victim *tcpConn
	if len(s.conns) >= s.max {
		if victim = s.victim(); victim == nil {
			s.mu.Unlock()
			s.g.tcpRefused.Add(1)
			c.Close()
			return nil
		}
		s.drop(victim)
	}
	tc := &tcpConn{Conn: c, l: l, client: client}
	tc.last.Store(time.Now().UnixNano())
	s.conns[tc] = struct{}{}
	s.byClient[client]++
	s.g.tcpOpen.Add(1)
	s.mu.Unlock()
	if victim != nil {
		s.g.tcpEvicted.Add(1)
		victim.Conn.Close() // the server's read ends; its Close finds the slot gone
	}
	return tc
}

// victim is the idle connection of the client holding the most, the one
// idle longest among that client's; nil when none is idle. Called with mu
// held; a linear scan of at most max connections, only when all are open.
func (s *tcpSlots) victim() *tcpConn {
	var best *tcpConn
	bestN, bestLast := 0, int64(0)
	for c := range s.conns {
		if c.busy.Load() {
			continue
		}
		n, last := s.byClient[c.client], c.last.Load()
		if best == nil || n > bestN || (n == bestN && last < bestLast) {
			best, bestN, bestLast = c, n, last
		}
	}
	return best
}

// drop frees c's slot; called with mu held.
func (s *tcpSlots) drop(c *tcpConn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.byClient[c.client]--; s.byClient[c.client] <= 0 {
		delete(s.byClient, c.client)
	}
	s.g.tcpOpen.Add(-1)
}

func (s *tcpSlots) release(c *tcpConn) {
	s.mu.Lock()
	s.drop(c)
	s.mu.Unlock()
}

// clientAddr is the address of a connection's client, IPv4 unmapped.
func clientAddr(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(t.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// tcpListener hands out connections whose writes time out, each holding
// one of slots.
type tcpListener struct {
	net.Listener
	slots *tcpSlots
	write time.Duration
}

func (l *tcpListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.slots.admit(c, l); tc != nil {
			return tc, nil
		}
	}
}

// tcpConn bounds every write by the write timeout and closes the connection
// when a write fails, so that the server's read loop ends too (miekg/dns
// keeps reading after a failed write). It is busy from the first byte of a
// query read until its reply is written (miekg/dns answers one query of a
// connection at a time), and idle otherwise. Closing it frees its slot.
type tcpConn struct {
	net.Conn
	l      *tcpListener
	client netip.Addr
	busy   atomic.Bool
	last   atomic.Int64 // unix nanoseconds of the last read or write
}

func (c *tcpConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.busy.Store(true)
		c.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *tcpConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.l.write)); err != nil {
		c.Close()
		return 0, err
	}
	n, err := c.Conn.Write(b)
	c.last.Store(time.Now().UnixNano())
	c.busy.Store(false)
	if err != nil {
		c.Close()
	}
	return n, err
}

func (c *tcpConn) Close() error {
	err := c.Conn.Close()
	c.l.slots.release(c)
	return err
}
