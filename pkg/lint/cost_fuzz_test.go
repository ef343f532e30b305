package lint

import (
	"context"
	"runtime"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/manifest"
)

// Allocation per input byte of a lint run: parsing, the checks and the
// report's line numbers together (issue 55 row 6: each item of a List
// parsed the whole List again, so a run grew with the square of its
// items).
const (
	lintBytesFactor = 400
	lintFixedBytes  = 4 << 20
)

// FuzzLintCost: any manifest input is parsed, checked and located within
// lintBytesFactor bytes of allocation per input byte plus lintFixedBytes.
func FuzzLintCost(f *testing.F) {
	f.Add(badList(200))
	f.Add(badList(3))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  dnsPolicy: None\n  dnsConfig: {nameservers: [1.1.1.1, 2.2.2.2, 3.3.3.3, 4.4.4.4], searches: [a, b]}\n  containers: [{name: c, image: x}]\n---\nkind: List\napiVersion: v1\nitems: []\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"template":{"spec":{"dnsPolicy":"None"}}}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		objs, err := manifest.Parse("in.yaml", in, manifest.DefaultLimits.MaxObjects)
		if err == nil {
			if targets, _, err := Targets(objs); err == nil {
				if _, err := Run(context.Background(), targets, APICheck); err != nil {
					t.Fatal(err)
				}
			}
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(lintBytesFactor*len(in) + lintFixedBytes); alloc > limit {
			t.Fatalf("a %d-byte input allocated %d bytes (%.0f per byte), over %d", len(in), alloc, float64(alloc)/float64(len(in)), limit)
		}
	})
}
