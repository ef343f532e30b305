package hosts

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzParse: Parse never panics, its warnings name lines of the input, and
// what it accepts is consistent: every (address, name) it kept is answered
// by the table, and rendering the kept pairs as a hosts file and parsing
// that gives the same pairs without a warning.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"127.0.0.1 localhost\n::1 localhost ip6-localhost\n",
		"# NodeHosts\r\n10.0.0.1\tnode-1 Node-1.Local.\r\n",
		"fe80::1%eth0 router\n::ffff:10.0.0.9 mapped\n0.0.0.0 ads.example\n",
		"300.1.1.1 bad\n10.0.0.4\n10.0.0.5 a..b ok #c\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		lines := bytes.Count(in, []byte("\n")) + 1
		if len(p.warnings) > MaxWarnings+1 {
			t.Fatalf("%d warnings", len(p.warnings))
		}
		for _, w := range p.warnings {
			if w.Line < 0 || w.Line > lines {
				t.Fatalf("warning %q names line %d of %d", w, w.Line, lines)
			}
		}
		tab, err := build(p, compiled{ttl: 3600})
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		for _, pr := range p.pairs {
			qt := dns.TypeAAAA
			if pr.addr.Is4() {
				qt = dns.TypeA
			}
			rrs, found := tab.Lookup(pr.name, qt)
			if !found || !slices.Contains(values(rrs), pr.addr.String()) {
				t.Fatalf("%s %s not answered: %v, %v", pr.addr, pr.name, values(rrs), found)
			}
		}
		var out strings.Builder
		for _, pr := range p.pairs {
			fmt.Fprintf(&out, "%s %s\n", pr.addr, pr.name)
		}
		again, err := parse(strings.NewReader(out.String()))
		if err != nil || len(again.warnings) > 0 || !slices.Equal(again.pairs, p.pairs) {
			t.Fatalf("round trip of %q: %v, %v, %v", out.String(), again.pairs, again.warnings, err)
		}
	})
}
