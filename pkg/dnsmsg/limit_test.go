package dnsmsg

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func limitRRs(t *testing.T, lines ...string) []dns.RR {
	t.Helper()
	var rrs []dns.RR
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

// addrs are n A records of one owner: 10.0.0.1 to 10.0.0.n.
func addrs(owner string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s 5 IN A 10.0.0.%d", owner, i+1))
	}
	return out
}

func rrData(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	return strings.Join(out, " ")
}

func TestLimitAnswer(t *testing.T) {
	cname := "a.example. 5 IN CNAME hl.example."
	v6 := []string{"hl.example. 5 IN AAAA fd00::1", "hl.example. 5 IN AAAA fd00::2", "hl.example. 5 IN AAAA fd00::3"}
	tests := []struct {
		name  string
		rrs   []string
		limit int
		c     uint32
		want  string
	}{
		{"off", addrs("hl.example.", 5), 0, 1, "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4 10.0.0.5"},
		{"at the limit", addrs("hl.example.", 3), 3, 1, "10.0.0.1 10.0.0.2 10.0.0.3"},
		{"first window", addrs("hl.example.", 5), 2, 0, "10.0.0.1 10.0.0.2"},
		{"second window", addrs("hl.example.", 5), 2, 1, "10.0.0.3 10.0.0.4"},
		{"wraps round", addrs("hl.example.", 5), 2, 2, "10.0.0.5 10.0.0.1"},
		{"after a CNAME", append([]string{cname}, addrs("hl.example.", 4)...), 3, 1, "hl.example. 10.0.0.4 10.0.0.1 10.0.0.2"},
		{"AAAA", v6, 2, 1, "fd00::3 fd00::1"},
		{"runs of two owners", append(addrs("a.example.", 3), addrs("b.example.", 3)...), 2, 0, "10.0.0.1 10.0.0.2 10.0.0.1 10.0.0.2"},
		{"SRV is not cut", []string{"s.example. 5 IN SRV 0 50 80 a.example.", "s.example. 5 IN SRV 0 50 80 b.example.", "s.example. 5 IN SRV 0 50 80 c.example."}, 1, 0,
			"0 50 80 a.example. 0 50 80 b.example. 0 50 80 c.example."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rrs := limitRRs(t, tt.rrs...)
			before := rrData(rrs)
			got := LimitAnswer(rrs, tt.limit, tt.c)
			if s := rrData(got); s != tt.want {
				t.Errorf("LimitAnswer(limit %d, c %d) = %s, want %s", tt.limit, tt.c, s, tt.want)
			}
			if rrData(rrs) != before {
				t.Errorf("LimitAnswer changed its input")
			}
		})
	}
}

// TestLimitAnswerCovers: consecutive calls hand out every record of a run
// within ceil(n/limit) calls, whatever the first counter.
func TestLimitAnswerCovers(t *testing.T) {
	for _, n := range []int{2, 5, 24, 120} {
		for _, limit := range []int{1, 2, 7, 24, 25} {
			if limit >= n {
				continue
			}
			rrs := limitRRs(t, addrs("hl.example.", n)...)
			for _, c0 := range []uint32{0, 3, 1000} {
				seen := map[string]bool{}
				calls := (n + limit - 1) / limit
				for c := range uint32(calls) {
					got := LimitAnswer(rrs, limit, c0+c)
					if len(got) != limit {
						t.Fatalf("n %d limit %d: %d records", n, limit, len(got))
					}
					for _, rr := range got {
						seen[rr.String()] = true
					}
				}
				if len(seen) != n {
					t.Errorf("n %d limit %d from %d: %d of %d records in %d calls", n, limit, c0, len(seen), n, calls)
				}
			}
		}
	}
}
