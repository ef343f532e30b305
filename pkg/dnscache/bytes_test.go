package dnscache

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/miekg/dns"
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

// TestCacheBytesBound: answers of any size (100 B to 60 KB) keep the
// accounted bytes, and the heap the cache holds, within SuccessBytes.
func TestCacheBytesBound(t *testing.T) {
	const limit = 8 << 20
	c, err := New(sizedNext{}, Config{SuccessBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	sizes := []int{100, 1000, 5000, 20000, 33000, 60000}
	var offered int
	for i := range 2000 {
		size := sizes[i%len(sizes)]
		r, err := c.Exchange(context.Background(), query(fmt.Sprintf("n%d-%d.example.", i, size), dns.TypeTXT))
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("answer %d: %v %v", i, r, err)
		}
		offered += r.Len()
		if b := c.Bytes(Success); b > limit {
			t.Fatalf("after %d answers the cache accounts %d bytes, over %d", i+1, b, limit)
		}
	}
	held := int64(heapInUse()) - int64(before)
	if held > limit {
		t.Errorf("heap grew by %d bytes, over the %d limit", held, limit)
	}
	t.Logf("offered %.1f MiB in 2000 answers; cache %d entries, %.2f MiB accounted, heap +%.2f MiB (limit %d MiB)",
		float64(offered)/(1<<20), c.Len(Success), float64(c.Bytes(Success))/(1<<20), float64(held)/(1<<20), limit>>20)

	// The most recent answers are still served from the cache, unchanged.
	q := query(fmt.Sprintf("N1999-%d.EXAMPLE.", sizes[1999%len(sizes)]), dns.TypeTXT)
	want, _ := sizedNext{}.Exchange(context.Background(), q)
	r, src, err := c.Answer(context.Background(), q)
	if err != nil || src != Hit || len(r.Answer) != len(want.Answer) || r.Answer[0].(*dns.TXT).Txt[0] != want.Answer[0].(*dns.TXT).Txt[0] ||
		r.Answer[0].Header().Name != q.Question[0].Name {
		t.Errorf("cached answer differs: %v, %d records, %v", src, len(r.Answer), err)
	}
	// An answer bigger than the whole bound is returned and not cached.
	small, _ := New(sizedNext{}, Config{SuccessBytes: 16 << 10})
	if r, err := small.Exchange(context.Background(), query("huge-60000.example.", dns.TypeTXT)); err != nil || len(r.Answer) == 0 ||
		small.Len(Success) != 0 || small.Bytes(Success) != 0 {
		t.Errorf("answer over the bound: %v, %d cached, %d bytes", err, small.Len(Success), small.Bytes(Success))
	}
}
