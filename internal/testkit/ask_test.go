package testkit

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestAsk(t *testing.T) {
	u := NewUpstream(t, Reply(func(q dns.Question, r *dns.Msg) { r.Answer = []dns.RR{A(q.Name, 30, "192.0.2.1")} }))
	for _, network := range []string{"udp", "tcp"} {
		if r := Ask(t, network, u.Addr, new(dns.Msg).SetQuestion("a.example.", dns.TypeA)); len(r.Answer) != 1 {
			t.Errorf("%s: %v, want the answer", network, r)
		}
		AskFrom(t, network, "127.0.0.2", u.Addr, new(dns.Msg).SetQuestion("b.example.", dns.TypeA))
	}
	qs := u.Queries()
	if len(qs) != 4 || qs[0].Net != "udp" || qs[2].Net != "tcp" {
		t.Fatalf("queries %v, want udp then tcp", qs)
	}
	for _, i := range []int{1, 3} {
		if ip := qs[i].From.String(); !strings.HasPrefix(ip, "127.0.0.2:") {
			t.Errorf("AskFrom over %s came from %s, want 127.0.0.2", qs[i].Net, ip)
		}
	}

	f := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Ask(f, "tcp", RefusedAddr(t), new(dns.Msg).SetQuestion("c.example.", dns.TypeAAAA))
	}()
	if !strings.HasPrefix(f.msg, "tcp c.example. AAAA to 127.0.0.1:") {
		t.Errorf("failure message %q", f.msg)
	}
}

func TestNewQuery(t *testing.T) {
	if m := NewQuery("a.example.", dns.TypeA, 0); m.IsEdns0() != nil || m.Question[0].Name != "a.example." {
		t.Errorf("without a size: %v", m)
	}
	opt := &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("x")}
	o := NewQuery("a.example.", dns.TypeAAAA, 1232, opt).IsEdns0()
	if o == nil || o.UDPSize() != 1232 || o.Do() || len(o.Option) != 1 || o.Option[0] != opt {
		t.Errorf("OPT %v, want 1232 without DO, holding the option", o)
	}
}

// TestAnswerA: A gets the address, another type no data, a silent name no
// reply.
func TestAnswerA(t *testing.T) {
	u := NewUpstream(t, AnswerA(7, "192.0.2.9", func(name string) bool { return strings.HasPrefix(name, "quiet.") }), UDPOnly())
	r := Ask(t, "udp", u.Addr, new(dns.Msg).SetQuestion("a.example.", dns.TypeA))
	if len(r.Answer) != 1 || r.Answer[0].String() != "a.example.\t7\tIN\tA\t192.0.2.9" || !r.RecursionAvailable {
		t.Errorf("A: %v", r)
	}
	if r := Ask(t, "udp", u.Addr, new(dns.Msg).SetQuestion("a.example.", dns.TypeAAAA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("AAAA: %v, want no data", r)
	}
	quick := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	if r, _, err := quick.Exchange(NewQuery("quiet.example.", dns.TypeA, 0), u.Addr); err == nil {
		t.Errorf("silent name answered: %v", r)
	}
}

func TestThroughWire(t *testing.T) {
	m := NewQuery("a.example.", dns.TypeAAAA, 1232)
	got := ThroughWire(t, m)
	if got == m || got.String() != m.String() {
		t.Errorf("through the wire:\n%v\nwant a copy of\n%v", got, m)
	}
}
