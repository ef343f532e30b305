package forward

import (
	"context"
	"errors"
	"net/netip"
	"sync"
)

// errShed is the cause of an exchange's context when its slot was taken
// for a newer query (shares.take).
var errShed = errors.New("shed for a newer query")

// shares are the MaxConcurrent slots of a Forwarder, shared per client,
// then per registrable domain within a client (unbound's answer to a full
// request list: fairness per client, the oldest waiting query jostled
// out). When all are taken:
//
//   - a query of a client holding fewer than the client holding the most
//     takes the slot of that client's oldest exchange;
//   - a query of the client holding the most (it is over its share) takes
//     the slot of the oldest exchange of that client's largest domain
//     (DomainOf) when its own domain holds fewer there, else it fails at
//     once: a client flooding one domain is refused as by a plain cap,
//     instead of having every query sent.
//
// The exchange that gives its slot up has its context cancelled with
// errShed and fails at once (ErrOverloaded). Names that are never
// answered hold their slots for the whole timeout, so they are the oldest
// and pile up in their domains, while an answered query is young and its
// domain holds few: a client asking such names, over one domain or many,
// reverse zones or random types, keeps no other client's query out, and
// its own names of other domains get in too (node-local at the cluster DNS
// is one client for all its pods). No bound names a domain: the domain
// only orders whom a client's own query displaces.
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

// queue is exchanges in flight, oldest first, linked through their slots'
// links[level].
type queue struct {
	n           int
	first, last *slot
}

// The levels of a slot's links.
const (
	byClient = iota
	byDomain
)

type link struct{ prev, next *slot }

// clientShare is one client's exchanges in flight, and by domain.
type clientShare struct {
	addr netip.Addr
	queue
	domains map[string]*domainShare
}

// domainShare is one client's exchanges in flight for one domain.
type domainShare struct {
	name string
	queue
}

// slot is one exchange in flight.
type slot struct {
	c      *clientShare
	d      *domainShare
	links  [2]link
	seq    uint64 // order of take: lower is older
	cancel context.CancelCauseFunc
}

func (q *queue) push(sl *slot, level int) {
	sl.links[level] = link{prev: q.last}
	if q.last != nil {
		q.last.links[level].next = sl
	} else {
		q.first = sl
	}
	q.last = sl
	q.n++
}

func (q *queue) unlink(sl *slot, level int) {
	l := sl.links[level]
	if l.prev != nil {
		l.prev.links[level].next = l.next
	} else {
		q.first = l.next
	}
	if l.next != nil {
		l.next.links[level].prev = l.prev
	} else {
		q.last = l.prev
	}
	sl.links[level] = link{}
	q.n--
}

// older reports whether q's oldest is older than o's.
func (q *queue) older(o *queue) bool { return q.first.seq < o.first.seq }

func newShares(max int) *shares {
	return &shares{max: max, clients: map[netip.Addr]*clientShare{}}
}

// take gives client a slot for an exchange of a name of domain whose
// context cancel ends, or nil when the client is over its share and
// domain holds the most of it. shed is whether another exchange gave its
// slot up.
func (s *shares) take(client netip.Addr, domain string, cancel context.CancelCauseFunc) (sl *slot, shed bool) {
	s.mu.Lock()
	c := s.clients[client]
	var victim *slot
	if s.n >= s.max {
		big := largest(s.clients)
		if c == nil || c.n < big.n {
			victim = big.first
		} else {
			// Over its share: room only from a larger domain of its own.
			bd := largest(c.domains)
			if d := c.domains[domain]; d != nil && d.n >= bd.n {
				s.mu.Unlock()
				return nil, false
			}
			victim = bd.first
		}
		s.remove(victim)
		c = s.clients[client]
	}
	if c == nil {
		c = &clientShare{addr: client, domains: map[string]*domainShare{}}
		s.clients[client] = c
	}
	d := c.domains[domain]
	if d == nil {
		d = &domainShare{name: domain}
		c.domains[domain] = d
	}
	s.seq++
	sl = &slot{c: c, d: d, cancel: cancel, seq: s.seq}
	c.push(sl, byClient)
	d.push(sl, byDomain)
	s.n++
	s.mu.Unlock()
	if victim != nil {
		victim.cancel(errShed)
	}
	return sl, victim != nil
}

// queued is a clientShare or a domainShare: its queue.
type queued interface{ queued() *queue }

func (q *queue) queued() *queue { return q }

// largest is the share of m holding the most (of two holding as many, the
// one whose oldest is older): among the clients, the one whose exchange
// gives way; among a client's domains, the one its own gives way in.
// Called with mu held when all slots are taken: a scan of at most max
// clients.
func largest[K comparable, S queued](m map[K]S) S {
	var big S
	var bq *queue
	for _, s := range m {
		if q := s.queued(); bq == nil || q.n > bq.n || (q.n == bq.n && q.older(bq)) {
			big, bq = s, q
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

// remove unlinks sl from its client and domain; called with mu held.
func (s *shares) remove(sl *slot) {
	c, d := sl.c, sl.d
	c.unlink(sl, byClient)
	d.unlink(sl, byDomain)
	sl.c, sl.d = nil, nil
	s.n--
	if d.n == 0 {
		delete(c.domains, d.name)
	}
	if c.n == 0 {
		delete(s.clients, c.addr)
	}
}

// usage is the number of slots taken and of clients with an exchange in
// flight, read together.
func (s *shares) usage() (slots, clients int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, len(s.clients)
}
