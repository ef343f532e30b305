package nodelocal

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// sizedUpstream answers "<anything>-<size>.example." TXT with about size
// bytes of TXT strings, as an upstream with big answers would.
type sizedUpstream struct{}

func (sizedUpstream) Exchange(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
	name := q.Question[0].Name
	var size int
	_, _ = fmt.Sscanf(name[strings.LastIndexByte(strings.TrimSuffix(name, ".example."), '-')+1:], "%d", &size)
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
// accounted bytes, and the heap the cache holds, within Config.CacheBytes.
func TestCacheBytesBound(t *testing.T) {
	const limit = 8 << 20
	h, err := New(sizedUpstream{}, Config{CacheBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	sizes := []int{100, 1000, 5000, 20000, 33000, 60000}
	var offered int
	for i := range 2000 {
		size := sizes[i%len(sizes)]
		req := new(dns.Msg)
		req.SetQuestion(fmt.Sprintf("n%d-%d.example.", i, size), dns.TypeTXT)
		r := h.Answer(context.Background(), req, true)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("%s: %v", req.Question[0].Name, r.Rcode)
		}
		offered += r.Len()
		if b := h.CacheBytes(); b > limit {
			t.Fatalf("after %d answers the cache accounts %d bytes, over %d", i+1, b, limit)
		}
	}
	held := int64(heapInUse()) - int64(before)
	if held > limit {
		t.Errorf("heap grew by %d bytes, over the %d limit", held, limit)
	}
	t.Logf("offered %.1f MiB in 2000 answers; cache %d entries, %.2f MiB accounted, heap +%.2f MiB (limit %d MiB)",
		float64(offered)/(1<<20), h.Len(), float64(h.CacheBytes())/(1<<20), float64(held)/(1<<20), limit>>20)

	// The most recent answers are still served from the cache, unchanged.
	req := new(dns.Msg)
	req.SetQuestion(fmt.Sprintf("N1999-%d.EXAMPLE.", sizes[1999%len(sizes)]), dns.TypeTXT)
	before1999, _ := sizedUpstream{}.Exchange(context.Background(), req)
	r := h.Answer(context.Background(), req, true)
	if h.m.hits == nil || len(r.Answer) != len(before1999.Answer) || r.Answer[0].(*dns.TXT).Txt[0] != before1999.Answer[0].(*dns.TXT).Txt[0] ||
		r.Answer[0].Header().Name != req.Question[0].Name {
		t.Errorf("cached answer differs: %d records", len(r.Answer))
	}
	// An answer bigger than the whole bound is served and not cached.
	small, _ := New(sizedUpstream{}, Config{CacheBytes: 16 << 10})
	req.SetQuestion("huge-60000.example.", dns.TypeTXT)
	if r := small.Answer(context.Background(), req, true); len(r.Answer) == 0 || small.Len() != 0 || small.CacheBytes() != 0 {
		t.Errorf("answer over the bound: %d records, %d cached, %d bytes", len(r.Answer), small.Len(), small.CacheBytes())
	}
}
