package store

import "hash/maphash"

// shardMap is an immutable map split into shards of plain Go maps: a
// lookup costs a hash and a map lookup, and an update copies only the shards
// it touches (see shardEdit), so a Snapshot shares every other shard with
// the one before it.
type shardMap[K comparable, V any] struct {
	seed maphash.Seed
	// blocks hold the shards, blockSize each; their number is a power of
	// two. Neither is modified once published.
	blocks []*shardBlock[K, V]
	n      int
}

// blockSize is the number of shards per block: an update copies the block
// array and the blocks it touches, not every shard pointer.
const blockSize = 64

type shardBlock[K comparable, V any] [blockSize]map[K]V

// shardTarget is the number of entries per shard a new or resized map aims
// at: small enough that copying a shard is cheap.
const shardTarget = 32

func newShardMap[K comparable, V any](size int) *shardMap[K, V] {
	n := 1
	for n*blockSize*shardTarget < size {
		n *= 2
	}
	m := &shardMap[K, V]{seed: maphash.MakeSeed(), blocks: make([]*shardBlock[K, V], n)}
	// Each shard is made for its share of size, and a little more: a
	// shard that grows while the map is filled rehashes what it holds.
	per := size/(n*blockSize) + 1
	per += per / 4
	for i := range m.blocks {
		m.blocks[i] = new(shardBlock[K, V])
		for j := range m.blocks[i] {
			m.blocks[i][j] = make(map[K]V, per)
		}
	}
	return m
}

func (m *shardMap[K, V]) shard(k K) int {
	var h uint64
	if s, ok := any(k).(string); ok {
		h = maphash.String(m.seed, s) // the names: faster than Comparable
	} else {
		h = maphash.Comparable(m.seed, k)
	}
	return int(h & uint64(len(m.blocks)*blockSize-1))
}

func (m *shardMap[K, V]) at(i int) map[K]V { return m.blocks[i/blockSize][i%blockSize] }

func (m *shardMap[K, V]) get(k K) (V, bool) {
	v, ok := m.at(m.shard(k))[k]
	return v, ok
}

func (m *shardMap[K, V]) len() int { return m.n }

func (m *shardMap[K, V]) all(f func(K, V)) {
	for _, b := range m.blocks {
		for _, s := range b {
			for k, v := range s {
				f(k, v)
			}
		}
	}
}

// shardEdit makes the next version of a shardMap: it copies the block
// array once, and each block and shard at its first change.
type shardEdit[K comparable, V any] struct {
	m      *shardMap[K, V]
	blocks map[int]bool // copied
	shards map[int]bool // copied
}

func (m *shardMap[K, V]) edit() *shardEdit[K, V] {
	next := &shardMap[K, V]{seed: m.seed, blocks: append([]*shardBlock[K, V](nil), m.blocks...), n: m.n}
	return &shardEdit[K, V]{m: next, blocks: map[int]bool{}, shards: map[int]bool{}}
}

func (e *shardEdit[K, V]) own(i int) map[K]V {
	b := i / blockSize
	if !e.blocks[b] {
		c := *e.m.blocks[b]
		e.m.blocks[b] = &c
		e.blocks[b] = true
	}
	if !e.shards[i] {
		old := e.m.blocks[b][i%blockSize]
		s := make(map[K]V, len(old)+1)
		for k, v := range old {
			s[k] = v
		}
		e.m.blocks[b][i%blockSize] = s
		e.shards[i] = true
	}
	return e.m.blocks[b][i%blockSize]
}

func (e *shardEdit[K, V]) set(k K, v V) {
	s := e.own(e.m.shard(k))
	if _, ok := s[k]; !ok {
		e.m.n++
	}
	s[k] = v
}

func (e *shardEdit[K, V]) del(k K) {
	i := e.m.shard(k)
	if _, ok := e.m.at(i)[k]; !ok {
		return
	}
	delete(e.own(i), k)
	e.m.n--
}

// done returns the new map, resized when it has outgrown its shards (a
// full copy, after the entries have grown fourfold).
func (e *shardEdit[K, V]) done() *shardMap[K, V] {
	return e.m.resized()
}

// resized is m, or a copy of it with more shards when it has outgrown its
// shards fourfold.
func (m *shardMap[K, V]) resized() *shardMap[K, V] {
	if m.n <= 4*shardTarget*blockSize*len(m.blocks) {
		return m
	}
	r := newShardMap[K, V](m.n)
	m.all(func(k K, v V) { r.set(k, v) })
	return r
}

// set adds or replaces an entry of a map that is not published yet.
func (m *shardMap[K, V]) set(k K, v V) {
	s := m.at(m.shard(k))
	if _, ok := s[k]; !ok {
		m.n++
	}
	s[k] = v
}

// del removes an entry of a map that is not published yet.
func (m *shardMap[K, V]) del(k K) {
	s := m.at(m.shard(k))
	if _, ok := s[k]; ok {
		delete(s, k)
		m.n--
	}
}

// get is the entry of k in the map being edited.
func (e *shardEdit[K, V]) get(k K) (V, bool) { return e.m.get(k) }
