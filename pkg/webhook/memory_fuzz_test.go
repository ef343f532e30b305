package webhook

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Memory per input byte: a review may take at most reviewBytesFactor
// bytes of allocation per byte of its body, plus reviewFixedBytes: the
// engine's work on the longest lists the decode lets through (1,000
// nameservers, searches or options, about 1.3 KiB each when every one is
// wrong). The bound is what keeps the webhook's in-flight budget, which
// counts body bytes, a bound on its memory too.
const (
	reviewBytesFactor = 32
	reviewFixedBytes  = 4 << 20
)

// shapedBody is a Pod CREATE review whose pod has inner in its spec
// (inMeta: in its metadata) and the review userInfo (groups).
func shapedBody(inMeta bool, inner string) []byte {
	meta, spec := "", ""
	if inMeta {
		meta = "," + inner
	} else {
		spec = "," + inner
	}
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE",` +
		`"object":{"metadata":{"name":"web-0","namespace":"default"` + meta + `},"spec":{"containers":[{"name":"a","image":"b"}]` + spec + `}}}}`)
}

// repeated is prefix, n copies of elem joined by commas, then suffix.
func repeated(prefix, elem string, n int, suffix string) string {
	return prefix + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + suffix
}

// FuzzReviewMemory decodes and reviews any body, as the handler does, and
// fails when its allocations pass reviewBytesFactor per input byte plus
// reviewFixedBytes. The seeds are the shapes that made a decoder allocate
// most (issue 55 row 2), at sizes a fuzzer mutates quickly.
func FuzzReviewMemory(f *testing.F) {
	for _, s := range []struct {
		meta  bool
		inner string
	}{
		{false, repeated(`"dnsConfig":{"searches":[`, `"a"`, 3000, `]}`)},
		{false, repeated(`"dnsConfig":{"searches":[`, `"a"`, 900, `]}`)},
		{false, repeated(`"dnsConfig":{"nameservers":[`, `"1"`, 900, `]}`)},
		{false, repeated(`"dnsConfig":{"options":[`, `{"name":"a"}`, 900, `]}`)},
		{false, repeated(`"dnsConfig":{"options":[`, `{}`, 3000, `]}`)},
		{true, repeated(`"annotations":{`, `"a":""`, 2000, `}`)},
		{false, repeated(`"nodeSelector":{`, `"k":"v"`, 900, `}`)},
		{false, `"dnsPolicy":"None","dnsConfig":{"nameservers":["1.1.1.1"],"searches":["a.b"],"options":[{"name":"ndots","value":"1"}]}`},
		{false, repeated(`"dnsConfig":{"options":[`, `{}`, 3000, `],"options":[]}`)},
		{false, repeated(`"dnsConfig":{"Options":[`, `{}`, 3000, `],"options":[]}`)},
		{false, repeated(`"nodeSelector":{`, `"k":"v"`, 900, `},"nodeSelector":{"j":"v"}`)},
	} {
		f.Add(shapedBody(s.meta, s.inner))
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","userInfo":{"groups":[` +
		strings.TrimSuffix(strings.Repeat(`"g",`, 3000), ",") + `]},"kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{}}}`))
	r := testReviewer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if review, err := decodeReview(body); err == nil {
			_, _, _, _ = r.Review(review.Request)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(reviewBytesFactor*len(body) + reviewFixedBytes); alloc > limit {
			t.Fatalf("a %d-byte review allocated %d bytes (%.1f per byte), over %d", len(body), alloc, float64(alloc)/float64(len(body)), limit)
		}
	})
}

// TestReviewMemoryShapes runs FuzzReviewMemory's check on each shape at the
// size of a real body (about 1 MiB) and reports the bytes per input byte.
func TestReviewMemoryShapes(t *testing.T) {
	r := testReviewer(t)
	for _, s := range []struct {
		name  string
		meta  bool
		inner string
	}{
		{"searches past the bound", false, repeated(`"dnsConfig":{"searches":[`, `"a"`, 250_000, `]}`)},
		{"searches at the bound", false, repeated(`"dnsConfig":{"searches":[`, `"a"`, 1000, `]}`)},
		{"options at the bound", false, repeated(`"dnsConfig":{"options":[`, `{"name":"a"}`, 1000, `]}`)},
		{"empty options past the bound", false, repeated(`"dnsConfig":{"options":[`, `{}`, 300_000, `]}`)},
		{"annotations past the API limit", true, repeated(`"annotations":{`, `"a":""`, 150_000, `}`)},
		{"annotations at the API limit", true, repeated(`"annotations":{`, `"a":"`+strings.Repeat("x", 20)+`"`, 10_000, `}`)},
		{"node selector past the bound", false, repeated(`"nodeSelector":{`, `"k":"v"`, 120_000, `}`)},
		// Repeated keys (issue 66 row 3): refused, or a case variant not read.
		{"options past the bound, then empty under the same key", false, repeated(`"dnsConfig":{"options":[`, `{}`, 300_000, `],"options":[]}`)},
		{"searches past the bound, then empty under the same key", false, repeated(`"dnsConfig":{"searches":[`, `"a"`, 250_000, `],"searches":[]}`)},
		{"Options past the bound, then options", false, repeated(`"dnsConfig":{"Options":[`, `{}`, 300_000, `],"options":[]}`)},
		{"dnsConfigs at the bound, repeated", false, repeated(`"dnsConfig":{"options":[`, `{"name":"a"}`, 1000, `]}`) + strings.Repeat(`,"dnsConfig":`+repeated(`{"options":[`, `{"name":"a"}`, 1000, `]}`), 70)},
		{"node selectors at the bound, repeated", false, strings.Repeat(repeated(`"nodeSelector":{`, `"k":"v"`, 1000, `},`), 80) + `"nodeSelector":{}`},
	} {
		t.Run(s.name, func(t *testing.T) {
			body := shapedBody(s.meta, s.inner)
			// Unique keys: a map of one key costs nothing, and a repeated
			// key is refused.
			if strings.Contains(s.inner, `"a":"`) || strings.Contains(s.inner, `"k":"v"`) {
				body = uniqueKeys(body)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			outcome, err := "", error(nil)
			if review, derr := decodeReview(body); derr == nil {
				_, o, _, rerr := r.Review(review.Request)
				outcome, err = string(o), rerr
			} else {
				err = derr
			}
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes: %d allocated (%.1f per byte); outcome %q, err %v", len(body), alloc, float64(alloc)/float64(len(body)), outcome, err)
			if limit := uint64(reviewBytesFactor*len(body) + reviewFixedBytes); alloc > limit {
				t.Errorf("allocated %d bytes, over %d", alloc, limit)
			}
		})
	}
}

// uniqueKeys numbers the keys "a" and "k" of body's repeated entries.
func uniqueKeys(body []byte) []byte {
	var b strings.Builder
	i := 0
	s := string(body)
	for {
		j := strings.IndexAny(s, "ak")
		if j < 0 || j+2 > len(s) || s[j+1] != '"' || j == 0 || s[j-1] != '"' {
			if j < 0 {
				b.WriteString(s)
				return []byte(b.String())
			}
			b.WriteString(s[:j+1])
			s = s[j+1:]
			continue
		}
		fmt.Fprintf(&b, "%s%d", s[:j+1], i)
		i++
		s = s[j+1:]
	}
}
