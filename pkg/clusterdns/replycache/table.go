package replycache

import (
	"hash/maphash"
	"sync/atomic"
)

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
