package nodelocal

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// answerBig answers n A records for big.ns.svc.cluster.local., the same
// behind a CNAME for its autopath name, and n for big.example. (outside
// the cluster zone).
func answerBig(n int) func(q dns.Question, r *dns.Msg) {
	return func(q dns.Question, r *dns.Msg) {
		owner := q.Name
		switch q.Name {
		case "big.search.ns.cluster.local.ap.k8s.io.":
			owner = "big.ns.svc.cluster.local."
			r.Answer = append(r.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: owner})
		case "big.ns.svc.cluster.local.", "big.example.":
		default:
			r.Rcode = dns.RcodeNameError
			return
		}
		if q.Qtype != dns.TypeA {
			return
		}
		for i := range n {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A: net.IPv4(10, 244, byte(i/250), byte(i%250+1))})
		}
	}
}

// TestUDPAnswerLimit: with a UDP answer limit the stage cuts a cluster
// name's (and an autopath name's) A RRset to the limit in UDP replies, TC
// clear, and consecutive replies hand out every record; TCP replies and
// names outside the cluster zone are whole (truncated as before over UDP).
func TestUDPAnswerLimit(t *testing.T) {
	const n, limit = 120, 24
	up := startUpstream(t, answerBig(n))
	tests := []struct {
		name  string
		qname string
		netw  string
		limit int
		want  int
		tc    bool
	}{
		{"cluster name over UDP", "big.ns.svc.cluster.local.", "udp", limit, limit, false},
		{"autopath name over UDP", "big.search.ns.cluster.local.ap.k8s.io.", "udp", limit, limit, false},
		{"cluster name over TCP", "big.ns.svc.cluster.local.", "tcp", limit, n, false},
		{"outside the cluster zone", "big.example.", "udp", limit, 74, true},
		{"off", "big.ns.svc.cluster.local.", "udp", 0, 73, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, addr := startNodeLocal(t, up.Addr, Config{UDPAnswerLimit: tt.limit})
			defer h.Close()
			seen := map[string]bool{}
			rounds := (n + limit - 1) / limit
			for i := range rounds {
				r := ask(t, addr, tt.netw, tt.qname, dns.TypeA, true)
				var addrs []string
				for _, rr := range r.Answer {
					if a, ok := rr.(*dns.A); ok {
						addrs = append(addrs, a.A.String())
						seen[a.A.String()] = true
					}
				}
				if len(addrs) != tt.want || r.Truncated != tt.tc {
					t.Fatalf("reply %d: %d addresses, TC %v; want %d, TC %v", i, len(addrs), r.Truncated, tt.want, tt.tc)
				}
			}
			if tt.limit > 0 && !tt.tc && len(seen) != n {
				t.Errorf("%d of %d addresses in %d replies", len(seen), n, rounds)
			}
		})
	}
}
