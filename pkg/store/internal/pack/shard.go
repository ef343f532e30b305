package pack

import (
	"hash/maphash"
	"slices"
)

// Map is an immutable map split into shards: a lookup costs one hash
// and a short walk of one shard (find), and an update copies only the shards
// it touches (see MapEdit), so a Snapshot shares every other shard with
// the one before it.
//
// A shard is a slice of entries sorted by the key's hash, not a Go map: a
// Go map would hash the name a second time, copying one rehashes every
// entry, and its slots cost about half again the entries' size. Copying a
// shard is one copy of its bytes.
type Map[K comparable, V any] struct {
	seed maphash.Seed
	// blocks hold the shards, blockSize each; their number is a power of
	// two. Neither is modified once published.
	blocks []*shardBlock[K, V]
	n      int
}

// entry is one key of a shard with its hash.
type entry[K comparable, V any] struct {
	h uint64
	k K
	v V
}

// blockSize is the number of shards per block: an update copies the block
// array and the blocks it touches, not every shard pointer.
const blockSize = 64

type shardBlock[K comparable, V any] [blockSize][]entry[K, V]

// shardTarget is the number of entries per shard a new or resized map aims
// at: small enough that copying a shard is cheap.
const shardTarget = 32

// NewMap is an empty map with shards for about size entries.
func NewMap[K comparable, V any](size int) *Map[K, V] {
	n := 1
	for n*blockSize*shardTarget < size {
		n *= 2
	}
	m := &Map[K, V]{seed: maphash.MakeSeed(), blocks: make([]*shardBlock[K, V], n)}
	// Each shard is made for its share of size, and a little more: a map
	// filled to size then holds few slices that grew (compact trims
	// those). Each is an object of its own, so that an edit's copy frees
	// the one it replaces.
	per := size/(n*blockSize) + 1
	per += per / 4
	for i := range m.blocks {
		m.blocks[i] = new(shardBlock[K, V])
		for j := range m.blocks[i] {
			m.blocks[i][j] = make([]entry[K, V], 0, per)
		}
	}
	return m
}

func (m *Map[K, V]) hash(k K) uint64 {
	if s, ok := any(k).(string); ok {
		return maphash.String(m.seed, s) // the names: faster than Comparable
	}
	return maphash.Comparable(m.seed, k)
}

// shard is the index of the shard of hash h.
func (m *Map[K, V]) shard(h uint64) int { return int(h & uint64(len(m.blocks)*blockSize-1)) }

func (m *Map[K, V]) at(i int) []entry[K, V] { return *m.slot(i) }

// slot is where shard i is held, for a map or an edit that may replace it.
func (m *Map[K, V]) slot(i int) *[]entry[K, V] { return &m.blocks[i/blockSize][i%blockSize] }

// find returns the position of k (hash h) in shard s, or where it would go.
// The hashes are uniform, so the search starts where h would sit if they
// were evenly spread (from its top bits; the low bits chose the shard)
// and walks from there: a lookup touches a line or two of the shard, where
// a binary search would touch four or five.
func find[K comparable, V any](s []entry[K, V], h uint64, k K) (int, bool) {
	i := int((h >> 32) * uint64(len(s)) >> 32)
	for i > 0 && s[i-1].h >= h {
		i--
	}
	for i < len(s) && s[i].h < h {
		i++
	}
	for j := i; j < len(s) && s[j].h == h; j++ {
		if s[j].k == k {
			return j, true
		}
	}
	return i, false
}

// Get is the value of k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	h := m.hash(k)
	s := m.at(m.shard(h))
	if i, ok := find(s, h, k); ok {
		return s[i].v, true
	}
	var zero V
	return zero, false
}

// Entry is Get with the key as the map holds it: a name built again can
// share the map's string instead of keeping a copy.
func (m *Map[K, V]) Entry(k K) (K, V, bool) {
	h := m.hash(k)
	s := m.at(m.shard(h))
	if i, ok := find(s, h, k); ok {
		return s[i].k, s[i].v, true
	}
	var zk K
	var zv V
	return zk, zv, false
}

// Len is the number of entries.
func (m *Map[K, V]) Len() int { return m.n }

// All calls f with each entry, in no order.
func (m *Map[K, V]) All(f func(K, V)) {
	for _, b := range m.blocks {
		for _, s := range b {
			for _, e := range s {
				f(e.k, e.v)
			}
		}
	}
}

// MapEdit makes the next version of a Map: it copies the block
// array once, and each block and shard at its first change.
type MapEdit[K comparable, V any] struct {
	m      *Map[K, V]
	blocks []bool // copied, by block
	// shards has a bit per shard copied, a word per block (blockSize is
	// 64): a change that touches every shard costs one test each, not a
	// search of those copied before.
	shards []uint64
}

// Edit starts the next version of m, which stays as it is.
func (m *Map[K, V]) Edit() *MapEdit[K, V] {
	next := &Map[K, V]{seed: m.seed, blocks: slices.Clone(m.blocks), n: m.n}
	return &MapEdit[K, V]{m: next, blocks: make([]bool, len(m.blocks)), shards: make([]uint64, len(m.blocks))}
}

// own returns shard i of the edit, copied at its first change with room
// for one more entry.
func (e *MapEdit[K, V]) own(i int) *[]entry[K, V] {
	b := i / blockSize
	if !e.blocks[b] {
		c := *e.m.blocks[b]
		e.m.blocks[b] = &c
		e.blocks[b] = true
	}
	p := e.m.slot(i)
	if bit := uint64(1) << (i % blockSize); e.shards[b]&bit == 0 {
		s := make([]entry[K, V], len(*p), len(*p)+1)
		copy(s, *p)
		*p = s
		e.shards[b] |= bit
	}
	return p
}

// Set adds or replaces the entry of k.
func (e *MapEdit[K, V]) Set(k K, v V) {
	h := e.m.hash(k)
	i := e.m.shard(h)
	j, ok := find(e.m.at(i), h, k)
	p := e.own(i) // a copy of what find read: j holds in it
	if ok {
		(*p)[j].v = v
		return
	}
	e.m.n++
	*p = slices.Insert(*p, j, entry[K, V]{h, k, v})
}

// Del removes the entry of k.
func (e *MapEdit[K, V]) Del(k K) {
	h := e.m.hash(k)
	i := e.m.shard(h)
	j, ok := find(e.m.at(i), h, k)
	if !ok {
		return
	}
	p := e.own(i)
	*p = slices.Delete(*p, j, j+1)
	e.m.n--
}

// Done returns the new map, resized when it has outgrown its shards (a
// full copy, after the entries have grown fourfold).
func (e *MapEdit[K, V]) Done() *Map[K, V] {
	return e.m.Resized()
}

// Resized is m, or a copy of it with more shards when it has outgrown its
// shards fourfold.
func (m *Map[K, V]) Resized() *Map[K, V] {
	if m.n <= 4*shardTarget*blockSize*len(m.blocks) {
		return m
	}
	r := NewMap[K, V](m.n)
	m.All(func(k K, v V) { r.Set(k, v) })
	return r.Compact()
}

// Set adds or replaces an entry of a map that is not published yet.
func (m *Map[K, V]) Set(k K, v V) {
	h := m.hash(k)
	p := m.slot(m.shard(h))
	j, ok := find(*p, h, k)
	if ok {
		(*p)[j].v = v
		return
	}
	m.n++
	*p = slices.Insert(*p, j, entry[K, V]{h, k, v})
}

// Del removes an entry of a map that is not published yet.
func (m *Map[K, V]) Del(k K) {
	h := m.hash(k)
	p := m.slot(m.shard(h))
	if j, ok := find(*p, h, k); ok {
		*p = slices.Delete(*p, j, j+1)
		m.n--
	}
}

// Compact copies the shards of a map that is not published yet that grew
// past the room NewMap gave them: an append left up to twice their
// entries' room.
func (m *Map[K, V]) Compact() *Map[K, V] {
	for _, b := range m.blocks {
		for i, s := range b {
			if cap(s)-len(s) > len(s)/4+2 {
				b[i] = append(make([]entry[K, V], 0, len(s)), s...)
			}
		}
	}
	return m
}

// Get is the value of k in the map being edited.
func (e *MapEdit[K, V]) Get(k K) (V, bool) { return e.m.Get(k) }
