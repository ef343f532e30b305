package dnsserver

import (
	"net/netip"
	"sync"
)

// tcpSlots are the TCP connections of a Server, every listener's: at most
// max open at once, and at most perClient from one client address. When
// every slot is taken, a newcomer takes the slot of a connection of the
// client holding the most, whatever that connection is doing: the one of
// that client with the oldest activity (its last query read or reply
// written). That connection is closed; RFC 7766 6.2.3 lets a server close
// connections under pressure, and the client reconnects. So a client
// holding hundreds of connections gives way to every other client,
// node-local's included, whether its connections are idle, waiting for
// replies, or sending bytes that never make a query.
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

// admit gives c a slot, or closes it and returns false.
func (s *tcpSlots) admit(c *tcpConn) bool {
	s.mu.Lock()
	if s.byClient[c.client] >= s.perClient {
		s.mu.Unlock()
		s.g.tcpClientLimited.Add(1)
		c.Conn.Close()
		return false
	}
	var victim *tcpConn
	if len(s.conns) >= s.max {
		if victim = s.victim(); victim == nil {
			s.mu.Unlock()
			s.g.tcpRefused.Add(1)
			c.Conn.Close()
			return false
		}
		s.drop(victim)
	}
	s.conns[c] = struct{}{}
	s.byClient[c.client]++
	s.g.tcpOpen.Add(1)
	s.mu.Unlock()
	if victim != nil {
		s.g.tcpEvicted.Add(1)
		victim.abort() // its slot is gone already
	}
	return true
}

// victim is the connection of the client holding the most with the
// oldest activity among that client's; nil when none is open. Called with
// mu held; a linear scan of at most max connections, only when all are
// open.
func (s *tcpSlots) victim() *tcpConn {
	var best *tcpConn
	bestN, bestLast := 0, int64(0)
	for c := range s.conns {
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

// open returns the connections holding a slot.
func (s *tcpSlots) open() []*tcpConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*tcpConn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}
