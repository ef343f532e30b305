package store

import "hash/maphash"

// shardMap is an immutable map split into shards of plain Go maps: a
// lookup costs a hash and a map lookup, and an update copies only the shards
// it touches (see shardEdit), so a Snapshot shares every other shard with
// the one before it.
type shardMap[K comparable, V any] struct {
	seed   maphash.Seed
	shards []map[K]V // len is a power of two; never modified once published
	n      int
}

// shardTarget is the number of entries per shard a new or resized map aims
// at: small enough that copying a shard is cheap.
const shardTarget = 32

func newShardMap[K comparable, V any](size int) *shardMap[K, V] {
	n := 1
	for n*shardTarget < size {
		n *= 2
	}
	m := &shardMap[K, V]{seed: maphash.MakeSeed(), shards: make([]map[K]V, n)}
	for i := range m.shards {
		m.shards[i] = map[K]V{}
	}
	return m
}

func (m *shardMap[K, V]) shard(k K) int {
	return int(maphash.Comparable(m.seed, k) & uint64(len(m.shards)-1))
}

func (m *shardMap[K, V]) get(k K) (V, bool) {
	v, ok := m.shards[m.shard(k)][k]
	return v, ok
}

func (m *shardMap[K, V]) len() int { return m.n }

func (m *shardMap[K, V]) all(f func(K, V)) {
	for _, s := range m.shards {
		for k, v := range s {
			f(k, v)
		}
	}
}

// shardEdit makes the next version of a shardMap: it copies the shard
// array once and each shard at its first change.
type shardEdit[K comparable, V any] struct {
	m      *shardMap[K, V]
	copied map[int]bool
}

func (m *shardMap[K, V]) edit() *shardEdit[K, V] {
	next := &shardMap[K, V]{seed: m.seed, shards: append([]map[K]V(nil), m.shards...), n: m.n}
	return &shardEdit[K, V]{m: next, copied: map[int]bool{}}
}

func (e *shardEdit[K, V]) own(i int) map[K]V {
	if !e.copied[i] {
		old := e.m.shards[i]
		s := make(map[K]V, len(old)+1)
		for k, v := range old {
			s[k] = v
		}
		e.m.shards[i] = s
		e.copied[i] = true
	}
	return e.m.shards[i]
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
	if _, ok := e.m.shards[i][k]; !ok {
		return
	}
	delete(e.own(i), k)
	e.m.n--
}

// done returns the new map, resized when it has outgrown its shards (a
// full copy, after the entries have grown fourfold).
func (e *shardEdit[K, V]) done() *shardMap[K, V] {
	m := e.m
	if m.n <= 4*shardTarget*len(m.shards) {
		return m
	}
	r := newShardMap[K, V](m.n)
	m.all(func(k K, v V) { r.shards[r.shard(k)][k] = v })
	r.n = m.n
	return r
}
