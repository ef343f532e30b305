package wirerotate

import (
	"fmt"
	"slices"
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
	if Plan(wire) == nil {
		t.Fatal("no plan for a good reply")
	}
	for n := range len(wire) {
		if p := Plan(wire[:n]); p != nil {
			t.Errorf("plan made from %d of %d bytes", n, len(wire))
		}
	}
	loop := slices.Clone(wire)
	loop[12] = 0xc0 // the question name points at itself
	loop[13] = 12
	_ = Plan(loop)
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
	if p := Plan(wire); p != nil {
		t.Fatalf("a plan was made; rotating would turn the PTR target %q into another name", m.Ns[0].(*dns.PTR).Ptr)
	}
	// Pointing at the A record's own owner name instead is safe: the plan
	// is made and fixes the pointer as the record moves.
	safe := slices.Clone(wire)
	safe[len(safe)-12] = 34 + 16
	if Plan(safe) == nil {
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
		if Plan(wire) == nil {
			b.Fatal("no plan")
		}
	}
}
