package clusterdns

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns/replycache"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("NewRR(%q): %v", s, err)
	}
	return rr
}

// packedReply is a compressed reply to qname A holding answer and extra
// (records in text form) with an OPT record, and its wire form.
func packedReply(t *testing.T, qname string, answer, extra []string) (*dns.Msg, []byte) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qname, dns.TypeA)
	m.Response, m.Compress = true, true
	for _, s := range answer {
		m.Answer = append(m.Answer, mustRR(t, s))
	}
	for _, s := range extra {
		m.Extra = append(m.Extra, mustRR(t, s))
	}
	m.SetEdns0(dnsmsg.EDNSSize, false)
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return m, wire
}

func rrLines(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = strings.Join(strings.Fields(rr.String()), " ")
	}
	return out
}

// TestPackedRotationMatchesMessageRotation: rotating a packed reply in place
// gives, hit after hit, exactly the bytes' meaning of rotating the message
// before packing (dnsmsg.RotateAnswer), compression pointers into moved records
// included; replies that cannot be rotated safely are served as they are.
func TestPackedRotationMatchesMessageRotation(t *testing.T) {
	const q = "_http._tcp.db.ns.svc.cluster.local."
	srv := func(target string, prio int) string {
		return fmt.Sprintf("%s 5 IN SRV %d 25 80 %s", q, prio, target)
	}
	cases := []struct {
		name   string
		qname  string
		answer []string
		extra  []string
		plan   bool
	}{
		{name: "A run", qname: "db.ns.svc.cluster.local.", plan: true, answer: []string{
			"db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "db.ns.svc.cluster.local. 5 IN A 10.0.0.2", "db.ns.svc.cluster.local. 5 IN A 10.0.0.3"}},
		{name: "AAAA run", qname: "db.ns.svc.cluster.local.", plan: true, answer: []string{
			"db.ns.svc.cluster.local. 5 IN AAAA fd00::1", "db.ns.svc.cluster.local. 5 IN AAAA fd00::2"}},
		{name: "CNAME then A run", qname: "alias.ns.svc.cluster.local.", plan: true, answer: []string{
			"alias.ns.svc.cluster.local. 5 IN CNAME db.ns.svc.cluster.local.",
			"db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "db.ns.svc.cluster.local. 5 IN A 10.0.0.2", "db.ns.svc.cluster.local. 5 IN A 10.0.0.3"}},
		{name: "SRV with additional pointing into the run", qname: q, plan: true,
			answer: []string{srv("a.db.ns.svc.cluster.local.", 0), srv("bb.db.ns.svc.cluster.local.", 0), srv("ccc.db.ns.svc.cluster.local.", 0), srv("d.db.ns.svc.cluster.local.", 0)},
			extra: []string{"a.db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "bb.db.ns.svc.cluster.local. 5 IN A 10.0.0.2",
				"ccc.db.ns.svc.cluster.local. 5 IN AAAA fd00::3", "d.db.ns.svc.cluster.local. 5 IN A 10.0.0.4"}},
		{name: "SRV priorities rotate apart", qname: q, plan: true,
			answer: []string{srv("a.db.ns.svc.cluster.local.", 0), srv("b.db.ns.svc.cluster.local.", 0), srv("c.db.ns.svc.cluster.local.", 10), srv("d.db.ns.svc.cluster.local.", 10), srv("e.db.ns.svc.cluster.local.", 10)}},
		{name: "single records", qname: "web.ns.svc.cluster.local.", answer: []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{name: "negative", qname: "nx.ns.svc.cluster.local."},
		{name: "owner outside the question, pointer inside the run", qname: "x.example.", answer: []string{
			"x.example. 5 IN CNAME y.example.", "z.example. 5 IN A 10.0.0.1", "z.example. 5 IN A 10.0.0.2"}},
		{name: "unknown type", qname: "db.ns.svc.cluster.local.", answer: []string{
			"db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "db.ns.svc.cluster.local. 5 IN A 10.0.0.2", "db.ns.svc.cluster.local. 5 IN MX 10 mx.db.ns.svc.cluster.local."}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, wire := packedReply(t, tc.qname, tc.answer, tc.extra)
			r := replycache.NewReply(slices.Clone(wire), true)
			if !tc.plan {
				// Served as it is, hit after hit.
				for range 3 {
					if got := r.AppendTo(nil, m.Id, m.RecursionDesired, m.CheckingDisabled); !slices.Equal(got, wire) {
						t.Fatalf("a reply that cannot be rotated safely changed:\n%x\n%x", got, wire)
					}
				}
				return
			}
			seen := map[string]bool{}
			for c := uint32(1); c <= 12; c++ {
				got := r.AppendTo(nil, m.Id, m.RecursionDesired, m.CheckingDisabled)
				r := new(dns.Msg)
				if err := r.Unpack(got); err != nil {
					t.Fatalf("hit %d: rotated reply does not unpack: %v", c, err)
				}
				want := rrLines(dnsmsg.RotateAnswer(m.Answer, c))
				if g := rrLines(r.Answer); !slices.Equal(g, want) {
					t.Fatalf("hit %d: answer\n  %s\nwant\n  %s", c, strings.Join(g, "\n  "), strings.Join(want, "\n  "))
				}
				if g, w := rrLines(r.Extra), rrLines(m.Extra); !slices.Equal(g, w) {
					t.Fatalf("hit %d: additional\n  %s\nwant\n  %s", c, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
				}
				if len(got) != len(wire) || r.Question[0] != m.Question[0] {
					t.Fatalf("hit %d: %d bytes, question %v", c, len(got), r.Question)
				}
				seen[rrLines(r.Answer)[len(r.Answer)-1]] = true
			}
			if len(seen) < 2 {
				t.Errorf("12 hits gave one order")
			}
		})
	}
}

// BenchmarkServeDNSLoadBalance is BenchmarkServeDNS with WithLoadBalance:
// cache hits rotated in place.
func BenchmarkServeDNSLoadBalance(b *testing.B) {
	run := func(b *testing.B, name string, qtype uint16, edns bool) {
		benchQuery(b, name, qtype, edns, WithLoadBalance(true))
	}
	b.Run("A", func(b *testing.B) { run(b, "web.ns.svc.cluster.local.", dns.TypeA, false) })
	b.Run("A-headless", func(b *testing.B) { run(b, "hl.ns.svc.cluster.local.", dns.TypeA, false) })
	b.Run("SRV-headless-EDNS", func(b *testing.B) { run(b, "_http._tcp.hl.ns.svc.cluster.local.", dns.TypeSRV, true) })
}
