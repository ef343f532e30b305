package pack

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// checkShardMap fails unless m holds exactly want, by get, len and all.
func checkShardMap(t *testing.T, m *Map[string, int], want map[string]int) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("len %d, want %d", m.Len(), len(want))
	}
	got := map[string]int{}
	m.All(func(k string, v int) { got[k] = v })
	if !maps.Equal(got, want) {
		t.Fatalf("all: %d entries differ from the %d wanted", len(got), len(want))
	}
	for k, v := range want {
		if g, ok := m.Get(k); !ok || g != v {
			t.Fatalf("get(%q) = %d, %v; want %d", k, g, ok, v)
		}
	}
	for i := range 50 {
		if _, ok := m.Get(fmt.Sprint("absent-", i)); ok {
			t.Fatalf("get(absent-%d) found", i)
		}
	}
	for _, b := range m.blocks {
		for _, s := range b {
			for i := 1; i < len(s); i++ {
				if s[i-1].h > s[i].h {
					t.Fatalf("shard out of hash order at %d", i)
				}
			}
		}
	}
}

// TestShardMapEdits runs random sets and deletes through edits and checks
// each version against a Go map, and that no edit changes a version
// published before it; the map grows past fourfold its shards, so it is
// resized on the way.
func TestShardMapEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	m := NewMap[string, int](100)
	want := map[string]int{}
	for i := range 100 {
		k := fmt.Sprint("k-", i)
		m.Set(k, i)
		want[k] = i
	}
	m = m.Compact().Resized()
	checkShardMap(t, m, want)
	type version struct {
		m    *Map[string, int]
		want map[string]int
	}
	var published []version
	for round := range 300 {
		e := m.Edit()
		for range 1 + r.IntN(200) {
			k := fmt.Sprint("k-", r.IntN(20000))
			if r.IntN(4) == 0 {
				e.Del(k)
				delete(want, k)
			} else {
				e.Set(k, round)
				want[k] = round
			}
			wv, wok := want[k]
			if v, ok := e.Get(k); ok != wok || v != wv {
				t.Fatalf("edit get(%q) = %d, %v in round %d, after setting or deleting it", k, v, ok, round)
			}
		}
		m = e.Done()
		checkShardMap(t, m, want)
		if round%10 == 0 {
			published = append(published, version{m, maps.Clone(want)})
		}
	}
	// No later edit changed a version published before it.
	for _, v := range published {
		checkShardMap(t, v.m, v.want)
	}
	if len(m.blocks) == 1 {
		t.Fatalf("the map never resized: %d entries in %d block", m.Len(), len(m.blocks))
	}
}

// TestShardFindSameHash checks find over entries that share a hash: each
// key is found, and a missing key's position is the first of its hash.
func TestShardFindSameHash(t *testing.T) {
	s := []entry[string, int]{{1, "a", 0}, {5, "b", 1}, {5, "c", 2}, {5, "d", 3}, {9, "e", 4}, {^uint64(0), "f", 5}}
	for _, tc := range []struct {
		h     uint64
		k     string
		i     int
		found bool
	}{
		{1, "a", 0, true}, {5, "b", 1, true}, {5, "c", 2, true}, {5, "d", 3, true}, {9, "e", 4, true},
		{^uint64(0), "f", 5, true}, {5, "x", 1, false}, {0, "x", 0, false}, {7, "x", 4, false},
		{^uint64(0), "x", 5, false}, {^uint64(0) - 1, "x", 5, false},
	} {
		if i, found := find(s, tc.h, tc.k); i != tc.i || found != tc.found {
			t.Errorf("find(%d, %q) = %d, %v; want %d, %v", tc.h, tc.k, i, found, tc.i, tc.found)
		}
	}
	if i, found := find([]entry[string, int](nil), 3, "a"); i != 0 || found {
		t.Errorf("find in an empty shard = %d, %v", i, found)
	}
}
