package replycache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

func TestGenerations(t *testing.T) {
	c := New[int](6<<20, 0)
	const size = 400
	hot := Key{Name: "hot.", Qtype: 1}
	c.Put(hot, 1, size, 0, []string{"hot."})
	// A flood of one-off names, touching the hot key now and then.
	for i := range 50000 {
		c.Put(Key{Name: fmt.Sprintf("n%d.", i), Qtype: 1}, 2, size, 0, []string{fmt.Sprintf("n%d.", i)})
		if i%1000 == 0 {
			if _, ok := c.Get(hot); !ok {
				t.Fatalf("hot entry evicted after %d inserts", i)
			}
		}
	}
	if n := c.Bytes(); n > c.max+size+200 {
		t.Errorf("cache holds %d bytes, bound %d", n, c.max)
	}
	if _, ok := c.Get(Key{Name: "n0.", Qtype: 1}); ok {
		t.Errorf("oldest one-off entry still cached")
	}
	if _, ok := c.Get(Key{Name: "n49999.", Qtype: 1}); !ok {
		t.Errorf("newest entry missing")
	}
}

// TestBorrowedKey: a Get through a key that borrows its name keeps
// working after the name's bytes are reused, also when the Get moved the
// entry into the current generation.
func TestBorrowedKey(t *testing.T) {
	c := New[int](6<<20, 0)
	c.Put(Key{Name: "hot.", Qtype: 1}, 1, 400, 0, []string{"hot."})
	buf := make([]byte, 4)
	for i := range 50000 {
		c.Put(Key{Name: fmt.Sprintf("n%d.", i), Qtype: 1}, 2, 400, 0, []string{fmt.Sprintf("n%d.", i)})
		if i%1000 == 0 {
			copy(buf, "hot.")
			if _, ok := c.Get(Key{Name: unsafe.String(&buf[0], len(buf)), Qtype: 1}); !ok {
				t.Fatalf("hot entry evicted after %d inserts", i)
			}
			copy(buf, "xot.")
		}
	}
	if _, ok := c.Get(Key{Name: "hot.", Qtype: 1}); !ok {
		t.Error("hot entry lost once the borrowed name's bytes were reused")
	}
	if _, ok := c.Get(Key{Name: "xot.", Qtype: 1}); ok {
		t.Error("an entry is keyed by the reused bytes")
	}
}

// TestIdle: a reply asked for within each idle period stays, one not
// asked for in two periods is dropped, by a Put or by Advance, and a
// cache that holds nothing does not rotate.
func TestIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New[int](6<<20, time.Minute)
	c.now = func() time.Time { return now }
	key := func(n string) Key { return Key{Name: n + ".", Qtype: 1} }
	put := func(n string) { c.Put(key(n), 1, 100, 0, []string{n + "."}) }
	has := func(n string) bool { _, ok := c.Get(key(n)); return ok }

	put("hot")
	put("cold")
	now = now.Add(59 * time.Second)
	put("young")
	if g := c.gens(); g.prev != nil {
		t.Fatalf("rotated before the generation was idle old")
	}
	now = now.Add(time.Second)
	put("fresh") // rotates: hot, cold and young are now the previous generation
	if !has("hot") {
		t.Fatalf("hot reply dropped after one idle period")
	}
	now = now.Add(time.Minute)
	c.Advance(0, nil) // a new snapshot rotates too
	for n, want := range map[string]bool{"hot": true, "fresh": true, "cold": false, "young": false} {
		if has(n) != want {
			t.Errorf("after two idle periods: %s cached %v, want %v", n, !want, want)
		}
	}
	if len(c.tags) != 2 {
		t.Errorf("tags of dropped replies kept: %d tags, want 2", len(c.tags))
	}

	empty := New[int](6<<20, time.Minute)
	empty.now = func() time.Time { return now }
	g := empty.gens()
	now = now.Add(time.Hour)
	empty.Advance(0, nil)
	if empty.gens() != g {
		t.Errorf("an empty cache rotated")
	}
}

// TestAdvance: a new epoch retires the replies of the names changed
// reports, all of them when it cannot tell, none on the first epoch; a
// reply made from an old epoch is not put.
func TestAdvance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changed []string // nil with known false: cannot tell
		known   bool
		first   bool
		want    []string // the replies still served
	}{
		{name: "first epoch", first: true, want: []string{"a", "b", "ab"}},
		{name: "nothing changed", known: true, want: []string{"a", "b", "ab"}},
		{name: "a changed", changed: []string{"a."}, known: true, want: []string{"b"}},
		{name: "b and an unknown name changed", changed: []string{"b.", "zz."}, known: true, want: []string{"a"}},
		{name: "cannot tell", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[string](1<<20, 0)
			c.Advance(1, nil)
			deps := map[string][]string{"a": {"a."}, "b": {"b."}, "ab": {"a.", "b."}}
			for n, d := range deps {
				c.Put(Key{Name: n + "."}, n, 10, 1, d)
			}
			c.Put(Key{Name: "old."}, "old", 10, 0, []string{"old."})
			var changed func(func(string)) bool
			if !tc.first {
				changed = func(retire func(string)) bool {
					for _, n := range tc.changed {
						retire(n)
					}
					return tc.known
				}
			}
			c.Advance(2, changed)
			var got []string
			for _, n := range []string{"a", "b", "ab", "old"} {
				if v, ok := c.Get(Key{Name: n + "."}); ok {
					if v != n {
						t.Errorf("%s: got reply %q", n, v)
					}
					got = append(got, n)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("served %v, want %v", got, tc.want)
			}
			c.Put(Key{Name: "late."}, "late", 10, 1, []string{"late."})
			if _, ok := c.Get(Key{Name: "late."}); ok {
				t.Error("a reply of the previous epoch was put")
			}
		})
	}
}

// TestReplacedKeepsTags: a reply made again after one of its names
// changed replaces the stale one, and a later change of a name both hold
// still retires it.
func TestReplacedKeepsTags(t *testing.T) {
	c := New[int](1<<20, 0)
	k := Key{Name: "x."}
	c.Put(k, 1, 10, 0, []string{"x.", "y."})
	c.Advance(1, func(retire func(string)) bool { retire("y."); return true })
	if _, ok := c.Get(k); ok {
		t.Fatal("stale reply served")
	}
	c.Put(k, 2, 10, 1, []string{"x.", "z."})
	if v, ok := c.Get(k); !ok || v != 2 {
		t.Fatalf("Get = %d, %v; want 2, true", v, ok)
	}
	c.Advance(2, func(retire func(string)) bool { retire("x."); return true })
	if _, ok := c.Get(k); ok {
		t.Fatal("reply of a changed name served")
	}
}

// TestGetAllocs: a hit in the current generation allocates nothing.
func TestGetAllocs(t *testing.T) {
	c := New[[]byte](1<<20, 0)
	k := Key{Name: "web.ns.svc.cluster.local.", Qtype: 1, Qclass: 1, EDNS: true, Limit: 1232}
	c.Put(k, make([]byte, 100), 100, 0, []string{k.Name})
	if n := testing.AllocsPerRun(100, func() { c.Get(k) }); n != 0 {
		t.Errorf("Get allocates %v times", n)
	}
}

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
