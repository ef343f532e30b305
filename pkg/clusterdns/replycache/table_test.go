package replycache

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTableAgainstMap: after any sequence of stores, a generation answers
// every key as a Go map does, keys that differ in one field only
// included, and reports as replaced exactly the keys stored before.
func TestTableAgainstMap(t *testing.T) {
	for s := range uint64(20) {
		r := rand.New(rand.NewPCG(s, 1))
		var g gen[int]
		want := map[Key]int{}
		key := func() Key {
			return Key{Name: fmt.Sprintf("n%d.", r.IntN(300)), Qtype: uint16(r.IntN(3)), Qclass: 1,
				EDNS: r.IntN(2) == 0, DO: r.IntN(4) == 0, Limit: uint16(512 * (1 + r.IntN(2)))}
		}
		for i := range 3000 {
			k := key()
			_, had := want[k]
			old, replaced := g.store(hashKey(k), k, entry[int]{v: i})
			if replaced != had || (had && old.v != want[k]) {
				t.Fatalf("seed %d: store %v replaced %v (%d), want %v (%d)", s, k, replaced, old.v, had, want[k])
			}
			want[k] = i
		}
		for range 2000 {
			k := key()
			e, ok := g.load(hashKey(k), k)
			w, had := want[k]
			if ok != had || (ok && e.v != w) {
				t.Fatalf("seed %d: load %v = %d, %v; want %d, %v", s, k, e.v, ok, w, had)
			}
		}
		n := 0
		g.all(func(entry[int]) { n++ })
		if n != len(want) {
			t.Fatalf("seed %d: all saw %d entries, want %d", s, n, len(want))
		}
	}
}

// TestTableReadDuringGrow: a reader without the lock finds every entry
// stored before it looked, while the writer keeps growing the table.
func TestTableReadDuringGrow(t *testing.T) {
	var (
		g    gen[int]
		mu   sync.Mutex
		done atomic.Int64 // entries 0..done-1 are stored
		wg   sync.WaitGroup
	)
	const total = 20000
	keyOf := func(i int) Key { return Key{Name: fmt.Sprintf("k%d.", i), Qtype: 1} }
	for range 2 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(done.Load()), 2))
			for done.Load() < total {
				n := done.Load()
				if n == 0 {
					continue
				}
				i := int(r.Int64N(n))
				k := keyOf(i)
				if e, ok := g.load(hashKey(k), k); !ok || e.v != i {
					t.Errorf("entry %d of %d missing (%v, %d)", i, n, ok, e.v)
					return
				}
			}
		})
	}
	for i := range total {
		k := keyOf(i)
		mu.Lock()
		g.store(hashKey(k), k, entry[int]{v: i})
		mu.Unlock()
		done.Store(int64(i + 1))
	}
	wg.Wait()
}

func BenchmarkGet(b *testing.B) {
	c := New[[]byte](16<<20, 0)
	keys := make([]Key, 20000)
	for i := range keys {
		keys[i] = Key{Name: fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local.", i, i%100), Qtype: 1, Qclass: 1, EDNS: true, Limit: 1232}
		c.Put(keys[i], make([]byte, 100), 100, 0, []string{keys[i].Name})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.Get(keys[i%len(keys)]); !ok {
				b.Fatal("miss")
			}
			i += 7919
		}
	})
}
