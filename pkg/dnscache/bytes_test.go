package dnscache

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

// sizedNext answers "<anything>-<size>.example." TXT with about size bytes
// of TXT strings, as an upstream with big answers would.
type sizedNext struct{}

func (sizedNext) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	name := q.Question[0].Name
	var size int
	_, _ = fmt.Sscanf(name[strings.LastIndexByte(strings.TrimSuffix(strings.ToLower(name), ".example."), '-')+1:], "%d", &size)
	r := new(dns.Msg)
	r.SetReply(q)
	var txt []string
	for size > 0 {
		n := min(size, 255)
		txt = append(txt, strings.Repeat("x", n))
		size -= n + 1
	}
	// One RR holds at most 64 KiB of strings: split into RRs of 200 strings.
	for len(txt) > 0 {
		n := min(len(txt), 200)
		r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: txt[:n]})
		txt = txt[n:]
	}
	return r, nil
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCacheBytesBound: answers of any size (100 B to 60 KB), and the
// finished replies kept with them (Keep, as node-local keeps its UDP
// replies), keep the accounted bytes within SuccessBytes after every answer
// (exactly), and the heap the cache holds within SuccessBytes too. The heap
// the cache holds is measured as what collecting the cache frees (the heap
// with it minus the heap once it is unreachable), which leaves out whatever
// else the loop left on the heap: the figure is the same to the byte from
// run to run, so the bound is checked without a margin for noise. The heap
// must also be within 1/64 of what the cache accounts for: the per-answer
// overhead (EntryOverhead) is an estimate of the entry, its name and its
// map slot, and a bound on accounted bytes is a bound on memory only as far
// as that estimate holds.
func TestCacheBytesBound(t *testing.T) {
	const limit = 8 << 20
	mixed := []int{100, 1000, 5000, 20000, 33000, 60000}
	for _, tc := range []struct {
		name  string
		sizes []int // of the answers, in turn
		n     int   // answers offered: at least three times what fits
		keep  bool  // keep two truncated UDP forms of each answer, as node-local does
	}{
		{"mixed", mixed, 2000, false},
		{"100B", []int{100}, 60000, false}, // per-answer overhead dominates
		{"33KB", []int{33000}, 700, false}, // just past the largest size class: whole pages
		{"60KB", []int{60000}, 400, false},
		{"mixed-kept", mixed, 2000, true},
		{"100B-kept", []int{100}, 30000, true},
	} {
		t.Run(tc.name, func(t *testing.T) { cacheBytesBound(t, limit, tc.sizes, tc.n, tc.keep) })
	}

	// An answer bigger than the whole bound is returned and not cached.
	small, _ := New(sizedNext{}, Config{SuccessBytes: 16 << 10})
	if r, err := small.Exchange(context.Background(), query("huge-60000.example.", dns.TypeTXT)); err != nil || len(r.Answer) == 0 ||
		small.Len(Success) != 0 || small.Bytes(Success) != 0 {
		t.Errorf("answer over the bound: %v, %d cached, %d bytes", err, small.Len(Success), small.Bytes(Success))
	}
}

func cacheBytesBound(t *testing.T, limit int64, sizes []int, n int, keep bool) {
	ctx := context.Background()
	c, err := New(sizedNext{}, Config{SuccessBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	var offered, full, evicting int
	for i := range n {
		size := sizes[i%len(sizes)]
		q := query(fmt.Sprintf("n%d-%d.example.", i, size), dns.TypeTXT)
		r, err := c.Exchange(ctx, q)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("answer %d: %v %v", i, r, err)
		}
		offered += r.Len()
		if keep {
			ans, err := c.AnswerTicket(ctx, q, dnsmsg.Origin{})
			r, src, ticket := ans.Msg, ans.Source, ans.Ticket
			if err != nil || src != Hit {
				t.Fatalf("answer %d again: %v, %v", i, src, err)
			}
			for _, size := range []int{512, 1232} {
				m := r.Copy()
				m.Truncate(size)
				b, err := m.Pack()
				if err != nil {
					t.Fatal(err)
				}
				c.Keep(ticket, uint32(size), b)
			}
		}
		if c.Len(Success) < i+1 { // something was evicted
			evicting++
		}
		b := c.Bytes(Success)
		if b > limit {
			t.Fatalf("after %d answers the cache accounts %d bytes, over %d", i+1, b, limit)
		}
		if b > limit-128<<10 {
			full++
		}
	}
	// The checks below prove something only of a cache that filled up
	// early and stayed full.
	if full == 0 || evicting < n/2 {
		t.Fatalf("of %d answers, %d came after the first eviction and %d left the cache within 128 KiB of its bound: offer more", n, evicting, full)
	}
	accounted, entries := c.Bytes(Success), c.Len(Success)

	// The most recent answer is still served from the cache, unchanged.
	q := query(fmt.Sprintf("N%d-%d.EXAMPLE.", n-1, sizes[(n-1)%len(sizes)]), dns.TypeTXT)
	want, _ := sizedNext{}.Exchange(ctx, q)
	r, src, err := c.Answer(ctx, q)
	if err != nil || src != Hit || len(r.Answer) != len(want.Answer) || r.Answer[0].(*dns.TXT).Txt[0] != want.Answer[0].(*dns.TXT).Txt[0] ||
		r.Answer[0].Header().Name != q.Question[0].Name {
		t.Errorf("cached answer differs: %v, %d records, %v", src, len(r.Answer), err)
	}

	with := heapInUse()
	runtime.KeepAlive(c) // c is unreachable from here on
	without := heapInUse()
	held, grown := int64(with)-int64(without), int64(with)-int64(before)
	t.Logf("offered %.1f MiB in %d answers; cache %d entries, %d bytes accounted; collecting it frees %d bytes (%.2f%% of the %d MiB bound; heap +%d since it was empty)",
		float64(offered)/(1<<20), n, entries, accounted, held, 100*float64(held)/float64(limit), limit>>20, grown)
	if held > limit {
		t.Errorf("the cache holds %d bytes of heap, over its %d-byte bound", held, limit)
	}
	if held > accounted+accounted/64 {
		t.Errorf("the cache holds %d bytes of heap, more than 1/64 over the %d it accounts for: the byte bound does not bound memory", held, accounted)
	}
}
