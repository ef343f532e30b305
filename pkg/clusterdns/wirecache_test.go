package clusterdns

import (
	"fmt"
	"testing"
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
