package autopath

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// FuzzParseOption checks properties of the search-list option parser, not
// only that it does not panic: an accepted option is within kubelet's limits,
// every entry is a valid domain without a trailing dot, the list joined again
// parses to itself, and a rejection is one of the documented errors or names
// the entry.
func FuzzParseOption(f *testing.F) {
	for _, s := range []string{
		"",
		"shop.svc.cluster.local,svc.cluster.local,cluster.local",
		"shop.svc.cluster.local.,corp.example.",
		"a..b", ",", "a,", "_srv._tcp.example", "x\x00y", "é.example",
		strings.TrimSuffix(strings.Repeat("a.example,", 32), ","),
		strings.TrimSuffix(strings.Repeat("a.example,", 33), ","),
		strings.Repeat("q", 64) + ".example",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseOption(data)
		if err != nil {
			if list != nil {
				t.Fatalf("error %v with a list %q", err, list)
			}
			if !errors.Is(err, ErrOptionTooLong) && !errors.Is(err, ErrOptionTooMany) &&
				!strings.HasPrefix(err.Error(), "autopath: search list option entry ") {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		if len(data) > policy.MaxSearchListChars || len(list) > policy.MaxSearchPaths {
			t.Fatalf("accepted %d bytes, %d entries", len(data), len(list))
		}
		for _, d := range list {
			if strings.HasSuffix(d, ".") || checkDomain(d) != nil {
				t.Fatalf("entry %q accepted", d)
			}
		}
		again, err := ParseOption([]byte(strings.Join(list, ",")))
		if err != nil || !reflect.DeepEqual(again, list) {
			t.Fatalf("round trip of %q: %q, %v", list, again, err)
		}
		// Expansion over an accepted list never yields an autopath name
		// (no loop) and ends with the base.
		c := Candidates("web.", list)
		if len(c) == 0 || c[len(c)-1] != "web." || len(c) > len(list)+1 {
			t.Fatalf("Candidates = %q", c)
		}
		for _, n := range c {
			if hasSuffixFold(n, "."+Suffix) {
				t.Fatalf("candidate %q carries the autopath suffix", n)
			}
		}
	})
}
