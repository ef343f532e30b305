package clusterdns

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
)

// benchWriter packs the reply as the server's writer would.
type benchWriter struct{ fakeWriter }

func (w *benchWriter) WriteMsg(m *dns.Msg) error   { _, err := m.Pack(); return err }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }

func benchQuery(b *testing.B, name string, qtype uint16, edns bool, opts ...Option) {
	h := NewHandler("cluster.local", fuzzStore(b), opts...)
	h.Warm()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	if edns {
		req.SetEdns0(1232, false)
	}
	w := &benchWriter{}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeDNS(w, req)
	}
}

// benchWire answers q from the wire, as the listener asks; it fails when
// h does not.
func benchWire(b *testing.B, h *Handler, q []byte) {
	dst := make([]byte, 0, 512)
	if _, ok := h.AnswerWire(dst, q); !ok {
		b.Fatal("not answered from the wire")
	}
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = h.AnswerWire(dst, q)
	}
}

// BenchmarkServeDNS measures the handler alone (no sockets): resolve, build
// the reply, truncate and pack.
func BenchmarkServeDNS(b *testing.B) {
	b.Run("A", func(b *testing.B) { benchQuery(b, "web.ns.svc.cluster.local.", dns.TypeA, false) })
	b.Run("NXDOMAIN", func(b *testing.B) { benchQuery(b, "web.ns.svc.cluster.local.ns.svc.cluster.local.", dns.TypeA, false) })
	b.Run("SRV-headless-EDNS", func(b *testing.B) { benchQuery(b, "_http._tcp.hl.ns.svc.cluster.local.", dns.TypeSRV, true) })
}

// BenchmarkCeilingHandler is the minimal handler of the benchmark harness,
// for comparison.
func BenchmarkCeilingHandler(b *testing.B) {
	a, _ := dns.NewRR("web.ns.svc.cluster.local. 5 IN A 10.0.0.1")
	table := map[string][]dns.RR{"web.ns.svc.cluster.local.": {a}}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = table[r.Question[0].Name]
		_ = w.WriteMsg(m)
	})
	req := new(dns.Msg)
	req.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	w := &benchWriter{}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeDNS(w, req)
	}
}

// BenchmarkServeDNSRewrite is a rewritten question answered from the zone
// (cached under the question as asked, as BenchmarkServeDNS), and the
// rules alone on the miss path: 64 rules of every match type that do not
// match, then one that does.
func BenchmarkServeDNSRewrite(b *testing.B) {
	b.Run("A-exact", func(b *testing.B) {
		rw, err := WithRewrites([]v1alpha1.Rewrite{{From: "db.example.com", To: "web.ns.svc.cluster.local"}})
		if err != nil {
			b.Fatal(err)
		}
		benchQuery(b, "db.example.com.", dns.TypeA, false, rw)
	})
	var rules []v1alpha1.Rewrite
	for i := range 16 {
		rules = append(rules,
			v1alpha1.Rewrite{Match: v1alpha1.RewriteExact, From: fmt.Sprintf("n%d.example.com", i), To: "a.example"},
			v1alpha1.Rewrite{Match: v1alpha1.RewriteSuffix, From: fmt.Sprintf(".s%d.internal", i), To: ".svc.cluster.local"},
			v1alpha1.Rewrite{Match: v1alpha1.RewriteSubstring, From: fmt.Sprintf("sub%d", i), To: "x"},
			v1alpha1.Rewrite{Match: v1alpha1.RewriteRegex, From: fmt.Sprintf(`^(.+)\.r%d\.$`, i), To: "{1}.svc.cluster.local"})
	}
	rw, err := newRewriter(rules)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"www.example.org.", "n15.example.com."} {
		b.Run("rules-64/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = rw.rewrite(name)
			}
		})
	}
}

// BenchmarkUDPAnswerLimit is a 120-endpoint headless A answer over UDP
// (EDNS0) from the reply cache: whole and truncated to 1232 bytes without
// the limit, cut to 24 with it (the next window each hit), from ServeDNS
// and from the wire.
func BenchmarkUDPAnswerLimit(b *testing.B) {
	for _, limit := range []int{0, 24} {
		h := NewHandler("cluster.local", limitStore(b), WithUDPAnswerLimit(limit))
		req := new(dns.Msg)
		req.SetQuestion("big.ns.svc.cluster.local.", dns.TypeA)
		req.SetEdns0(1232, false)
		w := &benchWriter{}
		h.ServeDNS(w, req) // cached
		b.Run(fmt.Sprintf("limit-%d/ServeDNS", limit), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeDNS(w, req)
			}
		})
		q, err := req.Pack()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("limit-%d/wire", limit), func(b *testing.B) { benchWire(b, h, q) })
	}
}
