package testkit

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestAsked(t *testing.T) {
	u := NewUpstream(t, Reply(func(dns.Question, *dns.Msg) {}), UDPOnly())
	c := &dns.Client{Timeout: 2 * time.Second}
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
		if _, _, err := c.Exchange(new(dns.Msg).SetQuestion(q.name, q.qtype), u.Addr); err != nil {
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
