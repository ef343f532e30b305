package clusterdns

import (
	"fmt"
	"testing"
	"time"
	"unsafe"
)

func TestWireCacheGenerations(t *testing.T) {
	c := wireCache{max: 6 << 20}
	entry := wireEntry{wire: make([]byte, 400)}
	hot := cacheKey{name: "hot.", qtype: 1}
	c.put(hot, entry, nil, []string{"hot."})
	// A flood of one-off names, touching the hot key now and then.
	for i := range 50000 {
		c.put(cacheKey{name: fmt.Sprintf("n%d.", i), qtype: 1}, entry, nil, []string{fmt.Sprintf("n%d.", i)})
		if i%1000 == 0 {
			if _, ok := c.get(hot); !ok {
				t.Fatalf("hot entry evicted after %d inserts", i)
			}
		}
	}
	g := c.gens()
	var total int64
	for _, gen := range []*wireGen{g.cur, g.prev} {
		if gen != nil {
			total += gen.size.Load()
		}
	}
	if total > c.max+int64(len(entry.wire)+200) {
		t.Errorf("cache holds %d bytes, bound %d", total, c.max)
	}
	if _, ok := c.get(cacheKey{name: "n0.", qtype: 1}); ok {
		t.Errorf("oldest one-off entry still cached")
	}
	if _, ok := c.get(cacheKey{name: "n49999.", qtype: 1}); !ok {
		t.Errorf("newest entry missing")
	}
}

// TestInZoneFold: the reply cache's zone test on a name as asked agrees
// with inZone on the same name in lowercase, and folds ASCII only.
func TestInZoneFold(t *testing.T) {
	for _, tc := range []struct {
		name, zone string
		want       bool
	}{
		{"web.ns.svc.cluster.local.", "cluster.local.", true},
		{"WEB.NS.SVC.Cluster.LOCAL.", "cluster.local.", true},
		{"cluster.local.", "cluster.local.", true},
		{"CLUSTER.LOCAL.", "cluster.local.", true},
		{"xcluster.local.", "cluster.local.", false},
		{"luster.local.", "cluster.local.", false},
		{"web.cluster.locax.", "cluster.local.", false},
		{"1.0.0.10.IN-ADDR.ARPA.", reverse4, true},
		{"example.com.", "", true},                                   // the root holds every name, as inZone
		{"web.ns.svc.cluster.loc\xc4\xb1.", "cluster.local.", false}, // no Unicode folding
		{"web.ns.svc.\xe2\x84\xaaluster.local.", "kluster.local.", false},
	} {
		if got := inZoneFold([]byte(tc.name), tc.zone); got != tc.want {
			t.Errorf("inZoneFold(%q, %q) = %v, want %v", tc.name, tc.zone, got, tc.want)
		}
		if got, want := inZoneFold([]byte(tc.name), tc.zone), inZone(asciiLower(tc.name), tc.zone); got != want {
			t.Errorf("inZoneFold(%q, %q) = %v, inZone of its lowercase %v", tc.name, tc.zone, got, want)
		}
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestWireCacheBorrowedKey: a get through a key that borrows its name
// (wireKey) keeps working after the name's bytes are reused, also when the
// get moved the entry into the current generation.
func TestWireCacheBorrowedKey(t *testing.T) {
	c := wireCache{max: 6 << 20}
	entry := wireEntry{wire: make([]byte, 400)}
	c.put(cacheKey{name: "hot.", qtype: 1}, entry, nil, []string{"hot."})
	buf := make([]byte, 4)
	for i := range 50000 {
		c.put(cacheKey{name: fmt.Sprintf("n%d.", i), qtype: 1}, entry, nil, []string{fmt.Sprintf("n%d.", i)})
		if i%1000 == 0 {
			copy(buf, "hot.")
			if _, ok := c.get(cacheKey{name: unsafe.String(&buf[0], len(buf)), qtype: 1}); !ok {
				t.Fatalf("hot entry evicted after %d inserts", i)
			}
			copy(buf, "xot.")
		}
	}
	if _, ok := c.get(cacheKey{name: "hot.", qtype: 1}); !ok {
		t.Error("hot entry lost once the borrowed name's bytes were reused")
	}
	if _, ok := c.get(cacheKey{name: "xot.", qtype: 1}); ok {
		t.Error("an entry is keyed by the reused bytes")
	}
}

// TestWireCacheIdle: a reply asked for within each idle period stays, one
// not asked for in two periods is dropped, by a put or by a new snapshot,
// and a cache that holds nothing does not rotate.
func TestWireCacheIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	c := wireCache{max: 6 << 20, idle: time.Minute, now: func() time.Time { return now }}
	entry := wireEntry{wire: make([]byte, 100)}
	key := func(n string) cacheKey { return cacheKey{name: n + ".", qtype: 1} }
	put := func(n string) { c.put(key(n), entry, nil, []string{n + "."}) }
	has := func(n string) bool { _, ok := c.get(key(n)); return ok }

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
	c.advance(nil, nil, nil) // a new snapshot rotates too
	for n, want := range map[string]bool{"hot": true, "fresh": true, "cold": false, "young": false} {
		if has(n) != want {
			t.Errorf("after two idle periods: %s cached %v, want %v", n, !want, want)
		}
	}
	if len(c.tags) != 2 {
		t.Errorf("tags of dropped replies kept: %d tags, want 2", len(c.tags))
	}

	empty := wireCache{max: 6 << 20, idle: time.Minute, now: func() time.Time { return now }}
	g := empty.gens()
	now = now.Add(time.Hour)
	empty.advance(nil, nil, nil)
	if empty.gens() != g {
		t.Errorf("an empty cache rotated")
	}
}
