package clusterdns

import (
	"hash/maphash"
	"sync/atomic"
)

// wireTable is one generation's map of packed replies: open addressing
// with linear probing over atomic slots. Reads take no lock. Writes run
// under wireCache.mu: they fill a free slot or swap a slot's entry for a
// new one, and never empty a slot. At half full the writer copies the
// table into one twice as large. A generation is dropped whole, so no
// entry is ever deleted.
//
// It replaced a sync.Map: on a cache hit the trie walk of sync.Map cost
// about a tenth of the UDP path's CPU.
type wireTable struct {
	slots []atomic.Pointer[wireSlot]
	n     int // filled slots; under wireCache.mu
}

// wireSlot is one entry; it is never modified once stored.
type wireSlot struct {
	hash uint64
	key  cacheKey
	e    wireEntry
}

// minWireSlots is the size of a generation's first table.
const minWireSlots = 64

var wireSeed = maphash.MakeSeed()

// hashKey hashes every field of k. The splitmix finalizer spreads the
// small fields over the low bits the probe starts from.
func hashKey(k cacheKey) uint64 {
	small := uint64(k.qtype) | uint64(k.qclass)<<16 | uint64(k.limit)<<32
	if k.edns {
		small |= 1 << 48
	}
	if k.do {
		small |= 1 << 49
	}
	h := maphash.String(wireSeed, k.name) ^ small
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	return h
}

func newWireTable(size int) *wireTable {
	return &wireTable{slots: make([]atomic.Pointer[wireSlot], size)}
}

// find returns the slot of k, or nil. The table is at most half full, so
// a probe always meets an empty slot.
func (t *wireTable) find(h uint64, k cacheKey) *wireSlot {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i].Load()
		if s == nil || s.hash == h && s.key == k {
			return s
		}
	}
}

// set stores s in its slot, or in the first empty one of its probe, and
// returns the slot it replaced. The caller holds wireCache.mu and has made
// room (grown).
func (t *wireTable) set(s *wireSlot) *wireSlot {
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
// more than half of it. wireCache.mu is held.
func (t *wireTable) grown() *wireTable {
	if 2*(t.n+1) <= len(t.slots) {
		return t
	}
	next := newWireTable(2 * len(t.slots))
	for i := range t.slots {
		if s := t.slots[i].Load(); s != nil {
			next.set(s)
		}
	}
	return next
}

// load returns the entry of k in the generation.
func (g *wireGen) load(h uint64, k cacheKey) (wireEntry, bool) {
	t := g.tab.Load()
	if t == nil {
		return wireEntry{}, false
	}
	if s := t.find(h, k); s != nil {
		return s.e, true
	}
	return wireEntry{}, false
}

// store puts e under k and returns the entry it replaced. wireCache.mu is
// held; k owns its name.
func (g *wireGen) store(h uint64, k cacheKey, e wireEntry) (wireEntry, bool) {
	t := g.tab.Load()
	if t == nil {
		t = newWireTable(minWireSlots)
		g.tab.Store(t)
	}
	if next := t.grown(); next != t {
		t = next
		g.tab.Store(t)
	}
	if old := t.set(&wireSlot{hash: h, key: k, e: e}); old != nil {
		return old.e, true
	}
	return wireEntry{}, false
}

// all calls f for every entry of the generation. wireCache.mu is held.
func (g *wireGen) all(f func(wireEntry)) {
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
