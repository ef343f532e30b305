package dnsserver

import (
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// wireCacheBytes bounds the packed replies cached per snapshot.
const wireCacheBytes = 6 << 20

// cacheKey is everything of a request that shapes the reply besides its ID
// and the RD and CD bits (patched per request): the question as sent (case
// included, since it is echoed), whether the reply carries an OPT and its DO
// bit, and the size the reply was truncated to.
type cacheKey struct {
	name   string
	qtype  uint16
	qclass uint16
	edns   bool
	do     bool
	limit  uint16
}

type wireEntry struct {
	wire  []byte
	rcode int
}

// wireCache holds packed replies for one snapshot's zone; a new snapshot
// gets a new zone with an empty cache, so entries never outlive the data
// they were made from. It keeps two generations of at most half of
// wireCacheBytes each: when the current one is full it becomes the previous
// one (the older is dropped), and a hit in the previous generation is moved
// to the current one, so the replies in use stay while a flood of one-off
// names (random NXDOMAIN) only churns the generations.
type wireCache struct {
	mu  sync.Mutex // serialises rotations
	gen atomic.Pointer[wireGens]
}

type wireGens struct{ cur, prev *wireGen }

type wireGen struct {
	m    sync.Map // cacheKey → wireEntry
	size atomic.Int64
}

func (c *wireCache) gens() *wireGens {
	if g := c.gen.Load(); g != nil {
		return g
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gen.Load(); g != nil {
		return g
	}
	g := &wireGens{cur: &wireGen{}}
	c.gen.Store(g)
	return g
}

func (c *wireCache) get(k cacheKey) (wireEntry, bool) {
	g := c.gens()
	if v, ok := g.cur.m.Load(k); ok {
		return v.(wireEntry), true
	}
	if g.prev == nil {
		return wireEntry{}, false
	}
	v, ok := g.prev.m.Load(k)
	if !ok {
		return wireEntry{}, false
	}
	e := v.(wireEntry)
	c.put(k, e)
	return e, true
}

func (c *wireCache) put(k cacheKey, e wireEntry) {
	cost := int64(len(e.wire) + len(k.name) + 96)
	g := c.gens()
	if g.cur.size.Add(cost) > wireCacheBytes/2 {
		c.mu.Lock()
		if c.gen.Load() == g {
			c.gen.Store(&wireGens{cur: &wireGen{}, prev: g.cur})
		}
		c.mu.Unlock()
		g = c.gen.Load()
		g.cur.size.Add(cost)
	}
	if _, loaded := g.cur.m.LoadOrStore(k, e); loaded {
		g.cur.size.Add(-cost)
	}
}

// cacheKeyOf returns the cache key of a request, and false for requests
// whose reply is not cacheable: responses, and queries dnsmsg.Check rejects
// (not exactly one question, not a plain query, EDNS versions other than 0).
// The size limit is dnsmsg.ReplySize, the size Finish truncates to.
func cacheKeyOf(req *dns.Msg, tcp bool) (cacheKey, bool) {
	if req.Response {
		return cacheKey{}, false
	}
	opt, rcode := dnsmsg.Check(req)
	if rcode != dns.RcodeSuccess {
		return cacheKey{}, false
	}
	q := req.Question[0]
	k := cacheKey{name: q.Name, qtype: q.Qtype, qclass: q.Qclass, limit: uint16(dnsmsg.ReplySize(opt, tcp))}
	if opt != nil {
		k.edns, k.do = true, opt.Do()
	}
	return k, true
}
