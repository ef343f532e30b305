package clusterdns

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWireTableAgainstMap: after any sequence of stores, a generation
// answers every key as a Go map does, keys that differ in one field only
// included, and reports as replaced exactly the keys stored before.
func TestWireTableAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var g wireGen
		want := map[cacheKey]int{}
		key := func() cacheKey {
			return cacheKey{name: fmt.Sprintf("n%d.", r.IntN(300)), qtype: uint16(r.IntN(3)), qclass: 1,
				edns: r.IntN(2) == 0, do: r.IntN(4) == 0, limit: uint16(512 * (1 + r.IntN(2)))}
		}
		for i := range 3000 {
			k := key()
			_, had := want[k]
			old, replaced := g.store(hashKey(k), k, wireEntry{rcode: i})
			if replaced != had || (had && old.rcode != want[k]) {
				t.Fatalf("seed %d: store %v replaced %v (%d), want %v (%d)", seed, k, replaced, old.rcode, had, want[k])
			}
			want[k] = i
		}
		for range 2000 {
			k := key()
			e, ok := g.load(hashKey(k), k)
			w, had := want[k]
			if ok != had || (ok && e.rcode != w) {
				t.Fatalf("seed %d: load %v = %d, %v; want %d, %v", seed, k, e.rcode, ok, w, had)
			}
		}
		n := 0
		g.all(func(wireEntry) { n++ })
		if n != len(want) {
			t.Fatalf("seed %d: all saw %d entries, want %d", seed, n, len(want))
		}
	}
}

// TestWireTableReadDuringGrow: a reader without the lock finds every entry
// stored before it looked, while the writer keeps growing the table.
func TestWireTableReadDuringGrow(t *testing.T) {
	var (
		g    wireGen
		mu   sync.Mutex
		done atomic.Int64 // entries 0..done-1 are stored
		wg   sync.WaitGroup
	)
	const total = 20000
	keyOf := func(i int) cacheKey { return cacheKey{name: fmt.Sprintf("k%d.", i), qtype: 1} }
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
				if e, ok := g.load(hashKey(k), k); !ok || e.rcode != i {
					t.Errorf("entry %d of %d missing (%v, %d)", i, n, ok, e.rcode)
					return
				}
			}
		})
	}
	for i := range total {
		k := keyOf(i)
		mu.Lock()
		g.store(hashKey(k), k, wireEntry{rcode: i})
		mu.Unlock()
		done.Store(int64(i + 1))
	}
	wg.Wait()
}

func BenchmarkWireCacheGet(b *testing.B) {
	c := wireCache{max: 16 << 20}
	keys := make([]cacheKey, 20000)
	for i := range keys {
		keys[i] = cacheKey{name: fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local.", i, i%100), qtype: 1, qclass: 1, edns: true, limit: 1232}
		c.put(keys[i], wireEntry{wire: make([]byte, 100)}, nil, []string{keys[i].name})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.get(keys[i%len(keys)]); !ok {
				b.Fatal("miss")
			}
			i += 7919
		}
	})
}
