package dnsmsg

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

func query(edns bool, size uint16, version uint8) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion("big.example.", dns.TypeA)
	if edns {
		m.SetEdns0(size, true)
		m.IsEdns0().SetVersion(version)
	}
	return m
}

func TestCheck(t *testing.T) {
	two := query(false, 0, 0)
	two.Question = append(two.Question, two.Question[0])
	notify := query(false, 0, 0)
	notify.Opcode = dns.OpcodeNotify
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		want int
	}{
		{"plain", query(false, 0, 0), dns.RcodeSuccess},
		{"edns0", query(true, 1232, 0), dns.RcodeSuccess},
		{"no question", new(dns.Msg), dns.RcodeFormatError},
		{"two questions", two, dns.RcodeFormatError},
		{"notify", notify, dns.RcodeNotImplemented},
		{"edns version 1", query(true, 1232, 1), dns.RcodeBadVers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := Check(tc.req); got != tc.want {
				t.Errorf("Check = %s, want %s", dns.RcodeToString[got], dns.RcodeToString[tc.want])
			}
		})
	}
}

func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      *dns.Msg
		tcp      bool
		wantSize int
		wantOPT  bool
	}{
		{"udp without edns0", query(false, 0, 0), false, 512, false},
		{"udp edns0 1232", query(true, 1232, 0), false, 1232, true},
		{"udp edns0 1000", query(true, 1000, 0), false, 1000, true},
		{"udp edns0 4096", query(true, 4096, 0), false, EDNSSize, true},
		{"udp edns0 65535", query(true, 65535, 0), false, EDNSSize, true},
		{"udp edns0 below 512", query(true, 100, 0), false, 512, true},
		{"tcp", query(false, 0, 0), true, 65535, false},
		{"tcp edns0", query(true, 1232, 0), true, 65535, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplySize(tc.req.IsEdns0(), tc.tcp); got != tc.wantSize {
				t.Fatalf("ReplySize = %d, want %d", got, tc.wantSize)
			}
			m := new(dns.Msg)
			m.SetReply(tc.req)
			for i := range 300 {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "big.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
					A: net.IPv4(10, 0, byte(i/256), byte(i%256))})
			}
			Finish(tc.req, m, tc.tcp)
			opt := m.IsEdns0()
			if (opt != nil) != tc.wantOPT {
				t.Fatalf("OPT %v, want one: %v", opt, tc.wantOPT)
			}
			if opt != nil && (opt.UDPSize() != EDNSSize || !opt.Do()) {
				t.Errorf("OPT size %d do %v, want %d and the client's DO", opt.UDPSize(), opt.Do(), EDNSSize)
			}
			if m.Len() > tc.wantSize {
				t.Errorf("reply of %d bytes, limit %d", m.Len(), tc.wantSize)
			}
			if full := tc.wantSize >= 300*16+100; m.Truncated == full || (len(m.Answer) == 300) != full {
				t.Errorf("TC=%v with %d answers for limit %d", m.Truncated, len(m.Answer), tc.wantSize)
			}
		})
	}
}

// TestFinishCompresses: a reply that fits its limit uncompressed is still
// compressed, over TCP and UDP alike. 120 A records of one long owner name
// take about 16 bytes each compressed and about 50 each uncompressed.
func TestFinishCompresses(t *testing.T) {
	const owner = "web-0.headless-service-with-a-long-name.some-namespace.svc.cluster.local."
	for _, tcp := range []bool{false, true} {
		req := new(dns.Msg)
		req.SetQuestion(owner, dns.TypeA)
		req.SetEdns0(1232, false)
		m := new(dns.Msg)
		m.SetReply(req)
		n := 120
		if !tcp {
			n = 10 // fits 1232 bytes uncompressed
		}
		for i := range n {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
				A: net.IPv4(10, 0, 0, byte(i))})
		}
		Finish(req, m, tcp)
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if want := 12 + len(owner) + 1 + 4 + n*16 + 11; m.Truncated || len(wire) > want {
			t.Errorf("tcp=%v: %d records in %d bytes (TC=%v), want at most %d (compressed)", tcp, n, len(wire), m.Truncated, want)
		}
	}
}

func TestQuery(t *testing.T) {
	q := dns.Question{Name: "a.example.", Qtype: dns.TypeAAAA, Qclass: dns.ClassINET}
	for _, do := range []bool{false, true} {
		m := Query(q, do)
		opt := m.IsEdns0()
		if !m.RecursionDesired || len(m.Question) != 1 || m.Question[0] != q || opt == nil || opt.UDPSize() != EDNSSize || opt.Do() != do {
			t.Errorf("Query(do=%v) = %v", do, m)
		}
	}
}

func TestWithoutOPT(t *testing.T) {
	a := &dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET}}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	for _, tc := range []struct {
		name string
		in   []dns.RR
		want int
	}{
		{"empty", nil, 0},
		{"no opt", []dns.RR{a, a}, 2},
		{"opt last", []dns.RR{a, opt}, 1},
		{"opts everywhere", []dns.RR{opt, a, opt, a, opt}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WithoutOPT(tc.in)
			if len(got) != tc.want {
				t.Fatalf("%d records left, want %d", len(got), tc.want)
			}
			for _, rr := range got {
				if rr.Header().Rrtype == dns.TypeOPT {
					t.Fatal("an OPT is left")
				}
			}
		})
	}
}
