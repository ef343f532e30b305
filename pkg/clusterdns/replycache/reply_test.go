package replycache

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func mustRR(tb testing.TB, s string) dns.RR {
	tb.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		tb.Fatalf("NewRR(%q): %v", s, err)
	}
	return rr
}

// TestPlanMalformed: a plan is never made from bytes that do not
// parse, and making one never panics.
func TestPlanMalformed(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("db.ns.svc.cluster.local.", dns.TypeA)
	m.Compress = true
	m.Answer = []dns.RR{mustRR(t, "db.ns.svc.cluster.local. 5 IN A 10.0.0.1"), mustRR(t, "db.ns.svc.cluster.local. 5 IN A 10.0.0.2")}
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if planRotation(wire) == nil {
		t.Fatal("no plan for a good reply")
	}
	for n := range len(wire) {
		if p := planRotation(wire[:n]); p != nil {
			t.Errorf("plan made from %d of %d bytes", n, len(wire))
		}
	}
	loop := slices.Clone(wire)
	loop[12] = 0xc0 // the question name points at itself
	loop[13] = 12
	_ = planRotation(loop)
}

// TestPlanNameRunsIntoRun: a name may start outside the answer's
// runs and read on into one (a label whose length byte ends a TXT record
// and whose bytes are the two A records). Rotating the records would change
// that name, so no plan is made. CI's fuzzing found the shape.
func TestPlanNameRunsIntoRun(t *testing.T) {
	wire := []byte{
		0, 0, 0x81, 0x80, 0, 1, 0, 3, 0, 1, 0, 1,
		1, 'a', 0, 0, 1, 0, 1, // 12: question a. A
		0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 5, 0, 3, 2, 'x', 32, // 19: a. TXT "x\032"; offset 33 is 32
		0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 0, 0, 1, // 34: a. A 10.0.0.1
		0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 0, 0, 2, // 50: a. A 10.0.0.2
		0xc0, 12, 0, 12, 0, 1, 0, 0, 0, 5, 0, 2, 0xc0, 33, // 66: a. PTR, the name at 33: 32 bytes of A records, then a.
		0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0, // 80: OPT
	}
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		t.Fatalf("the test's message does not unpack: %v", err)
	}
	if len(m.Answer) != 3 || len(m.Ns) != 1 {
		t.Fatalf("the test's message has %d answer and %d authority records", len(m.Answer), len(m.Ns))
	}
	if p := planRotation(wire); p != nil {
		t.Fatalf("a plan was made; rotating would turn the PTR target %q into another name", m.Ns[0].(*dns.PTR).Ptr)
	}
	// Pointing at the A record's own owner name instead is safe: the plan
	// is made and fixes the pointer as the record moves.
	safe := slices.Clone(wire)
	safe[len(safe)-12] = 34 + 16
	if planRotation(safe) == nil {
		t.Fatal("no plan when the PTR target is the second A record's owner")
	}
}

// BenchmarkPlan plans the rotation of a 50-address reply, as the
// reply cache does for each new headless answer.
func BenchmarkPlan(b *testing.B) {
	m := new(dns.Msg)
	m.SetQuestion("db.ns.svc.cluster.local.", dns.TypeA)
	m.Compress = true
	for i := range 50 {
		m.Answer = append(m.Answer, mustRR(b, fmt.Sprintf("db.ns.svc.cluster.local. 5 IN A 10.0.0.%d", i+1)))
	}
	wire, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if planRotation(wire) == nil {
			b.Fatal("no plan")
		}
	}
}

// FuzzRotation rotates arbitrary packed replies in place, as a cached reply
// is rotated on every hit (WithLoadBalance). It must never panic or read
// out of bounds; a rotated reply has the same length and header bytes; a
// reply that miekg/dns unpacks still unpacks after each rotation, with the
// same question, the same answer records in some order, and the authority
// and additional sections unchanged; and for plain owner names the order
// is each run started c records on (rotated), as the
// handler rotates an uncached reply. A reply that unpacks
// is also tried as miekg/dns packs it with compression, as the handler
// caches replies.
//
//	go test -run '^$' -fuzz '^FuzzRotation$' -fuzztime 50000x ./pkg/clusterdns/replycache/
func FuzzRotation(f *testing.F) {
	for _, s := range rotationSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fuzzed bytes, and miekg/dns's own packing of them (canonical:
		// pointers only to earlier names, as the handler's replies have).
		wires, canonical := [][]byte{data}, []bool{false}
		var orig dns.Msg
		unpacked := orig.Unpack(data) == nil
		if unpacked {
			orig.Compress = true
			if packed, err := orig.Pack(); err == nil {
				if bytes.Equal(packed, data) {
					canonical[0] = true
				} else {
					wires, canonical = append(wires, packed), append(canonical, true)
				}
			}
		}
		for i, w := range wires {
			p := planRotation(w)
			if p == nil {
				continue
			}
			dst := bytes.Repeat([]byte{0xa5}, len(w)/2) // a reused buffer
			for c := uint32(1); c <= 32; c++ {
				got := p.apply(dst, w)
				if len(got) != len(w) || !bytes.Equal(got[:12], w[:12]) {
					t.Fatalf("wire %d hit %d: %d bytes, header %x; want %d bytes, header %x", i, c, len(got), got[:min(12, len(got))], len(w), w[:12])
				}
				if !unpacked {
					continue
				}
				var m, r dns.Msg
				if err := m.Unpack(w); err != nil {
					continue // the bytes, not the message, were fuzzed: only the packed form must unpack
				}
				if err := r.Unpack(got); err != nil {
					t.Fatalf("wire %d hit %d: rotated reply does not unpack: %v\n%x\n%x", i, c, err, w, got)
				}
				if !slices.Equal(rrStrings(r.Ns), rrStrings(m.Ns)) || !slices.Equal(rrStrings(r.Extra), rrStrings(m.Extra)) ||
					!slices.Equal(r.Question, m.Question) {
					t.Fatalf("wire %d hit %d: question, authority or additional changed:\n%v\n%v", i, c, &m, &r)
				}
				gotAns, wantAns := rrStrings(r.Answer), rrStrings(m.Answer)
				if canonical[i] && plainNames(m.Answer) {
					if want := rrStrings(rotated(m.Answer, c)); !slices.Equal(gotAns, want) {
						t.Fatalf("wire %d hit %d: answer\n  %s\nwant (rotated)\n  %s", i, c, strings.Join(gotAns, "\n  "), strings.Join(want, "\n  "))
					}
				}
				slices.Sort(gotAns)
				slices.Sort(wantAns)
				if !slices.Equal(gotAns, wantAns) {
					t.Fatalf("wire %d hit %d: answer records changed:\n%v\n%v", i, c, &m, &r)
				}
				dst = got
			}
		}
	})
}

// rotated is the order hit c gives rrs: each run of A, AAAA, or
// same-priority SRV records of one owner starts at its record c mod len.
// It reads the records, not the bytes, so it is an oracle independent of
// the plan.
func rotated(rrs []dns.RR, c uint32) []dns.RR {
	out := slices.Clone(rrs)
	for i := 0; i < len(rrs); {
		j := i + 1
		for j < len(rrs) && sameRun(rrs[i], rrs[j]) {
			j++
		}
		k := int(c % uint32(j-i))
		copy(out[i:], rrs[i+k:j])
		copy(out[j-k:], rrs[i:i+k])
		i = j
	}
	return out
}

// sameRun reports whether b continues a's run.
func sameRun(a, b dns.RR) bool {
	ha, hb := a.Header(), b.Header()
	if ha.Rrtype != hb.Rrtype || !strings.EqualFold(ha.Name, hb.Name) {
		return false
	}
	switch x := a.(type) {
	case *dns.A, *dns.AAAA:
		return true
	case *dns.SRV:
		y, ok := b.(*dns.SRV)
		return ok && x.Priority == y.Priority
	}
	return false
}

// rrStrings is each record's text, for comparing sections.
func rrStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}

// plainNames reports whether every owner in rrs is plain text (no
// escaped byte): only then do the packed rotation (lowercase bytes) and
// the message rotation (case-insensitive text) group runs the same way.
func plainNames(rrs []dns.RR) bool {
	for _, rr := range rrs {
		if strings.Contains(rr.Header().Name, `\`) {
			return false
		}
	}
	return true
}

// rotationSeeds are packed replies as the handler caches them: runs of A,
// AAAA and SRV records, compression pointers into them from the question,
// other records and the additional section, and a run behind a CNAME.
func rotationSeeds(tb testing.TB) [][]byte {
	const q = "_http._tcp.db.ns.svc.cluster.local."
	msg := func(qname string, qtype uint16, answer, extra []string) []byte {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.Response, m.Authoritative, m.Compress = true, true, true
		for _, s := range answer {
			rr, err := dns.NewRR(s)
			if err != nil {
				tb.Fatal(err)
			}
			m.Answer = append(m.Answer, rr)
		}
		for _, s := range extra {
			rr, err := dns.NewRR(s)
			if err != nil {
				tb.Fatal(err)
			}
			m.Extra = append(m.Extra, rr)
		}
		m.SetEdns0(1232, false)
		b, err := m.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return [][]byte{
		msg("hl.ns.svc.cluster.local.", dns.TypeA, []string{"hl.ns.svc.cluster.local. 5 IN A 10.1.0.1", "hl.ns.svc.cluster.local. 5 IN A 10.1.0.2", "hl.ns.svc.cluster.local. 5 IN A 10.1.0.3"}, nil),
		msg("HL.ns.svc.cluster.local.", dns.TypeAAAA, []string{"HL.ns.svc.cluster.local. 5 IN AAAA fd00::1", "HL.ns.svc.cluster.local. 5 IN AAAA fd00::2"}, nil),
		msg("alias.ns.svc.cluster.local.", dns.TypeA, []string{"alias.ns.svc.cluster.local. 5 IN CNAME hl.ns.svc.cluster.local.",
			"hl.ns.svc.cluster.local. 5 IN A 10.1.0.1", "hl.ns.svc.cluster.local. 5 IN A 10.1.0.2"}, nil),
		msg(q, dns.TypeSRV, []string{q + " 5 IN SRV 0 33 80 a.db.ns.svc.cluster.local.", q + " 5 IN SRV 0 33 80 bb.db.ns.svc.cluster.local.",
			q + " 5 IN SRV 10 33 80 ccc.db.ns.svc.cluster.local.", q + " 5 IN SRV 10 33 80 d.db.ns.svc.cluster.local."},
			[]string{"a.db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "bb.db.ns.svc.cluster.local. 5 IN A 10.0.0.2",
				"ccc.db.ns.svc.cluster.local. 5 IN AAAA fd00::3", "d.db.ns.svc.cluster.local. 5 IN A 10.0.0.4"}),
		msg("x.example.", dns.TypeA, []string{"x.example. 5 IN CNAME y.example.", "z.example. 5 IN A 10.0.0.1", "z.example. 5 IN A 10.0.0.2",
			"z.example. 5 IN TXT \"a\" \"b\"", "z.example. 5 IN PTR z.example."}, []string{"y.example. 5 IN SOA ns.y.example. h.y.example. 1 2 3 4 5"}),
		msg("db.ns.svc.cluster.local.", dns.TypeA, []string{"db.ns.svc.cluster.local. 5 IN A 10.0.0.1", "db.ns.svc.cluster.local. 5 IN A 10.0.0.2",
			"db.ns.svc.cluster.local. 5 IN MX 10 mx.db.ns.svc.cluster.local."}, nil),
	}
}
