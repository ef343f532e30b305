package dnsserver

import (
	"net/netip"
	"sync"
)

// tcpShare bounds the TCP queries answered at once, every connection's:
// at most max in total and perClient of one client address, with a fair
// share per client. Each query holds a goroutine and its message until
// answered, so this bounds the goroutines and memory clients can make
// the server hold.
//
// A client's share is max/(n+1) when n clients hold or wait for slots:
// one more than there are, so that a newcomer always finds room. A client
// under its share takes any free slot. A client at or over it takes one
// only while more than reserve are free: the last reserve slots are kept
// for the clients under their share, so one client's load never starves
// another's. A query that gets no slot waits, and its connection is not
// read meanwhile (backpressure, nothing dropped). A freed slot goes to the
// waiting client holding the fewest.
type tcpShare struct {
	max, perClient, reserve int

	mu      sync.Mutex
	total   int
	clients map[netip.Addr]*shareClient
	waiting map[*shareClient]struct{} // the clients with waiters
}

// shareClient is the slots one client address holds and its queries
// waiting for one, first come first served.
type shareClient struct {
	addr    netip.Addr
	held    int
	waiters []chan struct{}
}

func newTCPShare(maxInFlight, perClient, reserve int) *tcpShare {
	return &tcpShare{max: maxInFlight, perClient: min(perClient, maxInFlight), reserve: reserve,
		clients: make(map[netip.Addr]*shareClient), waiting: make(map[*shareClient]struct{})}
}

// acquire takes a slot for a query of client, waiting until one is free
// for it or stop is closed; false when stopped. wait is called before it
// waits. release frees the slot.
func (s *tcpShare) acquire(client netip.Addr, stop <-chan struct{}, wait func()) bool {
	s.mu.Lock()
	c := s.clients[client]
	if c == nil {
		c = &shareClient{addr: client}
		s.clients[client] = c
	}
	if len(c.waiters) == 0 && s.may(c) {
		s.take(c)
		s.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	c.waiters = append(c.waiters, ch)
	s.waiting[c] = struct{}{}
	s.mu.Unlock()
	wait()
	select {
	case <-ch:
		return true
	case <-stop:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range c.waiters {
		if w == ch {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			if len(c.waiters) == 0 {
				delete(s.waiting, c)
			}
			s.forget(c)
			s.grant() // one client fewer: the others' share grew
			return false
		}
	}
	// Granted meanwhile: give it back.
	s.put(c)
	return false
}

// release frees a slot of client taken by acquire.
func (s *tcpShare) release(client netip.Addr) {
	s.mu.Lock()
	s.put(s.clients[client])
	s.mu.Unlock()
}

// may reports whether c may take a slot now; called with mu held.
func (s *tcpShare) may(c *shareClient) bool {
	if c.held >= s.perClient || s.total >= s.max {
		return false
	}
	share := s.max / (len(s.clients) + 1)
	return c.held < share || s.max-s.total > s.reserve
}

func (s *tcpShare) take(c *shareClient) {
	c.held++
	s.total++
}

// put frees one of c's slots; called with mu held.
func (s *tcpShare) put(c *shareClient) {
	c.held--
	s.total--
	s.forget(c)
	s.grant()
}

// grant hands the free slots to the waiting clients that may take one,
// the one holding the fewest first; called with mu held.
func (s *tcpShare) grant() {
	for {
		var next *shareClient
		for w := range s.waiting {
			if s.may(w) && (next == nil || w.held < next.held) {
				next = w
			}
		}
		if next == nil {
			return
		}
		s.take(next)
		close(next.waiters[0])
		next.waiters = next.waiters[1:]
		if len(next.waiters) == 0 {
			delete(s.waiting, next)
		}
	}
}

// forget drops c once it holds and waits for nothing; called with mu held.
func (s *tcpShare) forget(c *shareClient) {
	if c.held == 0 && len(c.waiters) == 0 {
		delete(s.clients, c.addr)
	}
}
