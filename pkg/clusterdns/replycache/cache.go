package replycache

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Key is everything of a request that shapes the reply besides its ID and
// the bits the caller patches per request. Name is the question as sent
// (case included, since it is echoed). EDNS and DO say whether the reply
// carries an OPT and its DO bit; Limit is the size the reply was cut to.
type Key struct {
	Name   string
	Qtype  uint16
	Qclass uint16
	EDNS   bool
	DO     bool
	Limit  uint16
}

// entry is one reply and the names it was made from. It is served while
// none of them has changed.
type entry[V any] struct {
	v    V
	size int // of v, as Put was told
	deps []*tag
}

// valid reports whether none of the names the reply was made from has
// changed since.
func (e *entry[V]) valid() bool {
	for _, t := range e.deps {
		if t.stale.Load() {
			return false
		}
	}
	return true
}

// tag stands for one lowercase name in the entries made from it. A change
// of the name marks the tag stale. That retires every such entry at once.
type tag struct {
	stale atomic.Bool
	name  string
	refs  int // entries holding the tag; under Cache.mu
}

// Cache holds replies of type V across snapshots. The zero value is not
// usable; call New. It is safe for concurrent use.
type Cache[V any] struct {
	max  int64         // bytes of both generations together
	idle time.Duration // the age that rotates a generation; 0: none
	now  func() time.Time
	gen  atomic.Pointer[gens[V]]

	mu   sync.Mutex
	tags map[string]*tag // the live tag of each name
	// epoch is the snapshot the entries answer for: a reply made from
	// another is not put.
	epoch uint64
}

type gens[V any] struct{ cur, prev *gen[V] }

type gen[V any] struct {
	tab  atomic.Pointer[table[V]] // nil until the first store
	size atomic.Int64             // changed under Cache.mu
	born time.Time
}

// New returns a cache of at most maxBytes of replies. A generation idle
// for idle becomes the previous one at the next Put or Advance, so a reply
// nobody asked for in two such periods is dropped; 0 turns that off.
func New[V any](maxBytes int64, idle time.Duration) *Cache[V] {
	return &Cache[V]{max: maxBytes, idle: idle}
}

// clock is the cache's time: now, or time.Now.
func (c *Cache[V]) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// rotate makes a new current generation, the current one the previous one,
// and drops the previous one. c.mu is held.
func (c *Cache[V]) rotate(g *gens[V]) *gens[V] {
	if g.prev != nil {
		g.prev.all(c.release)
	}
	g = &gens[V]{cur: &gen[V]{born: c.clock()}, prev: g.cur}
	c.gen.Store(g)
	return g
}

// aged reports whether g holds replies and is idle old. c.mu is held.
func (c *Cache[V]) aged(g *gen[V]) bool {
	return c.idle > 0 && g.size.Load() > 0 && c.clock().Sub(g.born) >= c.idle
}

func (c *Cache[V]) gens() *gens[V] {
	if g := c.gen.Load(); g != nil {
		return g
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gensLocked()
}

func (c *Cache[V]) gensLocked() *gens[V] {
	if g := c.gen.Load(); g != nil {
		return g
	}
	g := &gens[V]{cur: &gen[V]{born: c.clock()}}
	c.gen.Store(g)
	return g
}

// Get returns the reply to k. It keeps no part of k.Name: the caller may
// pass a name that borrows bytes it reuses afterwards.
func (c *Cache[V]) Get(k Key) (V, bool) {
	g := c.gens()
	h := hashKey(k)
	var zero V
	if e, ok := g.cur.load(h, k); ok {
		if !e.valid() {
			return zero, false
		}
		return e.v, true
	}
	if g.prev == nil {
		return zero, false
	}
	e, ok := g.prev.load(h, k)
	if !ok || !e.valid() {
		return zero, false
	}
	c.mu.Lock()
	if e.valid() {
		k.Name = strings.Clone(k.Name) // k may borrow its name
		c.store(h, k, e)
	}
	c.mu.Unlock()
	return e.v, true
}

// Put caches v, of size bytes, as the reply to k. It was made from the
// snapshot epoch and from the lowercase names deps. It is dropped when
// the cache has moved on to another epoch.
func (c *Cache[V]) Put(k Key, v V, size int, epoch uint64, deps []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if c.tags == nil {
		c.tags = map[string]*tag{}
	}
	e := entry[V]{v: v, size: size, deps: make([]*tag, 0, len(deps))}
	for _, d := range deps {
		t := c.tags[d]
		if t == nil {
			t = &tag{name: d}
			c.tags[d] = t
		}
		if !slices.Contains(e.deps, t) {
			e.deps = append(e.deps, t)
		}
	}
	c.store(hashKey(k), k, e)
}

// entryOverhead is what an entry costs besides its value and name.
const entryOverhead = 96

func entryCost[V any](k Key, e entry[V]) int64 {
	return int64(e.size + len(k.Name) + entryOverhead + 8*len(e.deps))
}

// store puts e into the current generation, rotating it first when it is
// full. c.mu is held; h is hashKey(k).
func (c *Cache[V]) store(h uint64, k Key, e entry[V]) {
	// e's references count first: releasing the entry it replaces (the
	// same question, made again after another of its names changed) or a
	// generation being dropped must not forget a tag e holds. Else a later
	// change of that name would not retire e.
	for _, t := range e.deps {
		t.refs++
	}
	cost := entryCost(k, e)
	g := c.gensLocked()
	if g.cur.size.Load()+cost > c.max/2 || c.aged(g.cur) {
		g = c.rotate(g)
	}
	if old, ok := g.cur.store(h, k, e); ok {
		g.cur.size.Add(-entryCost(k, old))
		c.release(old)
	}
	g.cur.size.Add(cost)
}

// release drops e's tag references, forgetting tags no entry holds. c.mu
// is held.
func (c *Cache[V]) release(e entry[V]) {
	for _, t := range e.deps {
		if t.refs--; t.refs <= 0 && c.tags[t.name] == t {
			delete(c.tags, t.name)
		}
	}
}

// Advance moves the cache on to the snapshot epoch. Replies made from
// another epoch are no longer put. changed calls retire for each name that
// changed since the previous epoch, and returns false when it cannot tell:
// then every reply is retired. A nil changed retires nothing (the first
// epoch). The replies made from a retired name are not served again.
func (c *Cache[V]) Advance(epoch uint64, changed func(retire func(name string)) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = epoch
	if g := c.gen.Load(); g != nil && c.aged(g.cur) {
		c.rotate(g)
	}
	if changed == nil {
		return
	}
	if !changed(c.retire) {
		c.gen.Store(&gens[V]{cur: &gen[V]{born: c.clock()}})
		for _, t := range c.tags {
			t.stale.Store(true)
		}
		c.tags = nil
	}
}

// retire marks the entries made from name stale. c.mu is held.
func (c *Cache[V]) retire(name string) {
	if t := c.tags[name]; t != nil {
		t.stale.Store(true)
		delete(c.tags, name)
	}
}

// Bytes is what the cached replies cost, both generations together: at
// most the bound New was given, plus one reply.
func (c *Cache[V]) Bytes() int64 {
	g := c.gens()
	n := g.cur.size.Load()
	if g.prev != nil {
		n += g.prev.size.Load()
	}
	return n
}

// table is one generation's map of replies: open addressing with linear
// probing over atomic slots. Reads take no lock. Writes run under
// Cache.mu: they fill a free slot or swap a slot's entry for a new one,
// and never empty a slot. At half full the writer copies the table into
// one twice as large. A generation is dropped whole, so no entry is ever
// deleted.
//
// It replaced a sync.Map: on a cache hit the trie walk of sync.Map cost
// about a tenth of the UDP path's CPU.
type table[V any] struct {
	slots []atomic.Pointer[slot[V]]
	n     int // filled slots; under Cache.mu
}

// slot is one entry; it is never modified once stored.
type slot[V any] struct {
	hash uint64
	key  Key
	e    entry[V]
}

// minSlots is the size of a generation's first table.
const minSlots = 64

var seed = maphash.MakeSeed()

// hashKey hashes every field of k. The splitmix finalizer spreads the
// small fields over the low bits the probe starts from.
func hashKey(k Key) uint64 {
	small := uint64(k.Qtype) | uint64(k.Qclass)<<16 | uint64(k.Limit)<<32
	if k.EDNS {
		small |= 1 << 48
	}
	if k.DO {
		small |= 1 << 49
	}
	h := maphash.String(seed, k.Name) ^ small
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	return h
}

func newTable[V any](size int) *table[V] {
	return &table[V]{slots: make([]atomic.Pointer[slot[V]], size)}
}

// find returns the slot of k, or nil. The table is at most half full, so
// a probe always meets an empty slot.
func (t *table[V]) find(h uint64, k Key) *slot[V] {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i].Load()
		if s == nil || s.hash == h && s.key == k {
			return s
		}
	}
}

// set stores s in its slot, or in the first empty one of its probe, and
// returns the slot it replaced. The caller holds Cache.mu and has made
// room (grown).
func (t *table[V]) set(s *slot[V]) *slot[V] {
	mask := uint64(len(t.slots) - 1)
	for i := s.hash & mask; ; i = (i + 1) & mask {
		old := t.slots[i].Load()
		if old == nil {
			t.n++
			t.slots[i].Store(s)
			return nil
		}
		if old.hash == s.hash && old.key == s.key {
			t.slots[i].Store(s)
			return old
		}
	}
}

// grown is t, or a copy twice as large once one more entry would fill
// more than half of it. Cache.mu is held.
func (t *table[V]) grown() *table[V] {
	if 2*(t.n+1) <= len(t.slots) {
		return t
	}
	next := newTable[V](2 * len(t.slots))
	for i := range t.slots {
		if s := t.slots[i].Load(); s != nil {
			next.set(s)
		}
	}
	return next
}

// load returns the entry of k in the generation.
func (g *gen[V]) load(h uint64, k Key) (entry[V], bool) {
	t := g.tab.Load()
	if t == nil {
		return entry[V]{}, false
	}
	if s := t.find(h, k); s != nil {
		return s.e, true
	}
	return entry[V]{}, false
}

// store puts e under k and returns the entry it replaced. Cache.mu is
// held; k owns its name.
func (g *gen[V]) store(h uint64, k Key, e entry[V]) (entry[V], bool) {
	t := g.tab.Load()
	if t == nil {
		t = newTable[V](minSlots)
		g.tab.Store(t)
	}
	if next := t.grown(); next != t {
		t = next
		g.tab.Store(t)
	}
	if old := t.set(&slot[V]{hash: h, key: k, e: e}); old != nil {
		return old.e, true
	}
	return entry[V]{}, false
}

// all calls f for every entry of the generation. Cache.mu is held.
func (g *gen[V]) all(f func(entry[V])) {
	t := g.tab.Load()
	if t == nil {
		return
	}
	for i := range t.slots {
		if s := t.slots[i].Load(); s != nil {
			f(s.e)
		}
	}
}
