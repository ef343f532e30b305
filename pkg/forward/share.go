package forward

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
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
// (unbound's answer to a full request list: fairness per client, and the
// oldest waiting query jostled out). When all are taken:
//
//   - a query of a client holding fewer than the client holding the most
//     takes the slot of that client's oldest exchange, whatever its age;
//   - a query of the client holding the most (it is over its share) takes
//     the slot of its own oldest exchange when that one has waited jostle
//     or longer (half the timeout), else it fails at once.
//
// The exchange that gives its slot up has its context cancelled with
// errShed and fails at once (ErrOverloaded). Names that are never
// answered hold their slots for the whole timeout, so they are the oldest,
// while an answered query is young: a client asking such names, over one
// domain or many, reverse zones or random types, keeps no other client's
// query out, and its own answered names get in too as long as its
// exchanges live past jostle (node-local at the cluster DNS is one
// client for all its pods). A client flooding faster than the slots turn
// over is refused at once, as with a plain cap, instead of having every
// query sent: it gets at most max/jostle exchanges a second.
//
// The count may pass max for as long as a shed exchange takes to see its
// context end (one read deadline); the slot is the newcomer's at once.
type shares struct {
	max    int
	jostle time.Duration
	now    func() time.Time

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
	start      time.Time
	cancel     context.CancelCauseFunc
}

func newShares(max int, jostle time.Duration) *shares {
	return &shares{max: max, jostle: jostle, now: time.Now, clients: map[netip.Addr]*clientShare{}}
}

// take gives client a slot for an exchange whose context cancel ends, or
// nil when the client is over its share and its oldest exchange is
// younger than jostle. shed is whether another exchange gave its slot up.
func (s *shares) take(client netip.Addr, cancel context.CancelCauseFunc) (sl *slot, shed bool) {
	now := s.now()
	s.mu.Lock()
	c := s.clients[client]
	var victim *slot
	if s.n >= s.max {
		big := s.largest()
		if c != nil && c.n >= big.n {
			// Over its share: only its own exchange that has waited long.
			if now.Sub(c.first.start) < s.jostle {
				s.mu.Unlock()
				return nil, false
			}
			big = c
		}
		victim = big.first
		s.remove(victim)
	}
	if c == nil || c.n == 0 {
		c = &clientShare{addr: client}
		s.clients[client] = c
	}
	s.seq++
	sl = &slot{c: c, cancel: cancel, prev: c.last, seq: s.seq, start: now}
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

// largest is the client holding the most (of two holding as many, the
// one whose oldest is older). Called with mu held when all slots are
// taken: a scan of at most max clients.
func (s *shares) largest() *clientShare {
	var big *clientShare
	for _, c := range s.clients {
		if big == nil || c.n > big.n || (c.n == big.n && c.first.seq < big.first.seq) {
			big = c
		}
	}
	return big
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
