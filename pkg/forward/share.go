package forward

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
)

// errShed is the cause of an exchange's context when its slot was taken
// for a newer query (shares.take).
var errShed = errors.New("shed for a newer query")

type clientKey struct{}

// WithClient marks ctx as the context of a query from client, the address
// the query came from. Exchange shares Config.MaxConcurrent per client:
// when every slot is taken, the oldest exchange of the client holding the
// most makes room. A context without it is one client of its own (the
// zero address).
func WithClient(ctx context.Context, client netip.Addr) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// ClientOf is the address of a query's client, IPv4 unmapped (the zero
// address for a net.Addr that is neither UDP nor TCP).
func ClientOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

func clientOf(ctx context.Context) netip.Addr {
	c, _ := ctx.Value(clientKey{}).(netip.Addr)
	return c
}

// shares are the MaxConcurrent slots of a Forwarder, shared per client
// (unbound's answer to a resolver's queue: fairness per client, and the
// oldest waiting query dropped). A query always gets a slot. When all are
// taken, the oldest exchange of the client holding the most gives its
// slot up: its context is cancelled with errShed and it fails at once
// (ErrOverloaded). A client sending names that are never answered thus
// holds at most what no one else asks for: every other client's query
// gets in, and an answered query is young, so never the oldest. This holds
// whatever the client sends (one domain or many, reverse zones, random
// types) and whoever it is: a pod at node-local, node-local at the
// cluster DNS.
//
// The count may pass max for as long as a shed exchange takes to see its
// context end (one read deadline); the slot is the newcomer's at once.
type shares struct {
	max int

	mu      sync.Mutex
	n       int
	seq     uint64 // the last slot's
	clients map[netip.Addr]*clientShare
}

// clientShare is one client's exchanges in flight, oldest first.
type clientShare struct {
	addr        netip.Addr
	n           int
	first, last *slot
}

// slot is one exchange in flight.
type slot struct {
	c          *clientShare
	prev, next *slot
	seq        uint64 // order of take: lower is older
	cancel     context.CancelCauseFunc
}

func newShares(max int) *shares {
	return &shares{max: max, clients: map[netip.Addr]*clientShare{}}
}

// take gives client a slot for an exchange whose context cancel ends. It
// returns the slot and whether another exchange was shed for it.
func (s *shares) take(client netip.Addr, cancel context.CancelCauseFunc) (sl *slot, shed bool) {
	s.mu.Lock()
	var victim *slot
	if s.n >= s.max {
		victim = s.oldestOfLargest()
		s.remove(victim)
	}
	c := s.clients[client]
	if c == nil {
		c = &clientShare{addr: client}
		s.clients[client] = c
	}
	s.seq++
	sl = &slot{c: c, cancel: cancel, prev: c.last, seq: s.seq}
	if c.last != nil {
		c.last.next = sl
	} else {
		c.first = sl
	}
	c.last = sl
	c.n++
	s.n++
	s.mu.Unlock()
	if victim != nil {
		victim.cancel(errShed)
	}
	return sl, victim != nil
}

// oldestOfLargest is the oldest slot of the client holding the most (of
// two holding as many, the one whose oldest is older). Called with mu held
// when all slots are taken: a scan of at most max clients.
func (s *shares) oldestOfLargest() *slot {
	var big *clientShare
	for _, c := range s.clients {
		if big == nil || c.n > big.n || (c.n == big.n && c.first.seq < big.first.seq) {
			big = c
		}
	}
	return big.first
}

// release frees sl, unless it was shed (its slot is gone already).
func (s *shares) release(sl *slot) {
	s.mu.Lock()
	if sl.c != nil {
		s.remove(sl)
	}
	s.mu.Unlock()
}

// remove unlinks sl from its client; called with mu held.
func (s *shares) remove(sl *slot) {
	c := sl.c
	if sl.prev != nil {
		sl.prev.next = sl.next
	} else {
		c.first = sl.next
	}
	if sl.next != nil {
		sl.next.prev = sl.prev
	} else {
		c.last = sl.prev
	}
	sl.c, sl.prev, sl.next = nil, nil, nil
	c.n--
	s.n--
	if c.n == 0 {
		delete(s.clients, c.addr)
	}
}

// inFlight is the number of slots taken.
func (s *shares) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// clientCount is the number of clients with an exchange in flight.
func (s *shares) clientCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}
