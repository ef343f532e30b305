package testkit

import (
	"testing"

	"github.com/miekg/dns"
)

// TestAsked also runs Exchange over UDP.
func TestAsked(t *testing.T) {
	u := NewUpstream(t, Reply(func(dns.Question, *dns.Msg) {}), UDPOnly())
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"www.example.org.", dns.TypeA},
		{"WWW.Example.org.", dns.TypeAAAA},
		{"other.example.", dns.TypeA},
		{".", dns.TypeNS},
		{"1234.0.loop-probe.dnsconfigurer.", dns.TypeHINFO},
	} {
		if _, err := Exchange("udp", u.Addr, q.name, q.qtype); err != nil {
			t.Fatal(err)
		}
	}
	if got := u.ClientQueries(); got != 3 {
		t.Errorf("ClientQueries = %d, want 3 (probes left out)", got)
	}
	if got := u.AskedFor("www.example.org."); got != 2 {
		t.Errorf("AskedFor = %d, want 2 (any case)", got)
	}
}

func TestExchangeTCP(t *testing.T) {
	u := NewUpstream(t, Reply(func(q dns.Question, r *dns.Msg) { r.Answer = []dns.RR{A(q.Name, 5, "192.0.2.1")} }))
	r, err := Exchange("tcp", u.Addr, "www.example.org.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 || !r.RecursionDesired {
		t.Fatalf("%v %v, want the answer to a recursive question", r, err)
	}
	if q := u.Queries(); len(q) != 1 || q[0].Net != "tcp" {
		t.Errorf("queries %+v, want one over TCP", q)
	}
}
