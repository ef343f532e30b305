package dnsmsg

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// packQuery packs a query for name and type A built by build.
func packQuery(t testing.TB, name string, build func(m *dns.Msg)) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Id = 0x1234
	if build != nil {
		build(m)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withEDNS(size uint16, do bool, opts ...dns.EDNS0) func(m *dns.Msg) {
	return func(m *dns.Msg) {
		m.SetEdns0(size, do)
		m.IsEdns0().Option = opts
	}
}

func TestParseQuery(t *testing.T) {
	long := strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 61) + "." // 255 octets
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"plain", packQuery(t, "web.prod.svc.cluster.local.", nil), true},
		{"case kept", packQuery(t, "Web.PROD.svc.cluster.local.", nil), true},
		{"root", packQuery(t, ".", nil), true},
		{"rd cd", packQuery(t, "a.example.", func(m *dns.Msg) { m.RecursionDesired, m.CheckingDisabled = false, true }), true},
		{"edns", packQuery(t, "a.example.", withEDNS(1232, false)), true},
		{"edns do", packQuery(t, "a.example.", withEDNS(4096, true)), true},
		{"cookie", packQuery(t, "a.example.", withEDNS(1232, false, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})), true},
		{"padding", packQuery(t, "a.example.", withEDNS(1232, false, &dns.EDNS0_PADDING{Padding: make([]byte, 20)})), true},
		{"255 octets", packQuery(t, long, nil), true},
		{"nsid", packQuery(t, "a.example.", withEDNS(1232, false, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})), false},
		{"subnet", packQuery(t, "a.example.", withEDNS(1232, false, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(10, 0, 0, 0)})), false},
		{"edns version 1", packQuery(t, "a.example.", func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), false},
		{"response", packQuery(t, "a.example.", func(m *dns.Msg) { m.Response = true }), false},
		{"notify", packQuery(t, "a.example.", func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), false},
		{"two questions", packQuery(t, "a.example.", func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), false},
		{"answer", packQuery(t, "a.example.", func(m *dns.Msg) {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}}}
		}), false},
		{"two additional", packQuery(t, "a.example.", func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}})
		}), false},
		{"additional not opt", packQuery(t, "a.example.", func(m *dns.Msg) {
			m.Extra = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}}}
		}), false},
		{"opt not root", packQuery(t, "a.example.", func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().Hdr.Name = "a.example." }), false},
		{"escaped dot", packQuery(t, `a\.b.example.`, nil), false},
		{"space", packQuery(t, `a\032b.example.`, nil), false},
		{"high byte", packQuery(t, `a\200b.example.`, nil), false},
		{"trailing byte", append(packQuery(t, "a.example.", nil), 0), false},
		{"short", packQuery(t, "a.example.", nil)[:20], false},
		{"header only", make([]byte, 12), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := ParseQuery(tc.b)
			if ok != tc.want {
				t.Fatalf("ParseQuery ok = %v, want %v", ok, tc.want)
			}
			if ok {
				checkParsed(t, tc.b, q)
			}
		})
	}
}

// TestParseQueryLimits: a name of 256 octets, a label over 63 and a
// compression pointer are not read.
func TestParseQueryLimits(t *testing.T) {
	b := packQuery(t, "a.example.", nil)
	q := append([]byte(nil), b[:12]...)
	for range 4 {
		q = append(q, 63)
		q = append(q, bytes.Repeat([]byte{'a'}, 63)...)
	}
	q = append(q, 0, 0, 1, 0, 1) // 257 octets
	if _, ok := ParseQuery(q); ok {
		t.Error("a name of 257 octets was read")
	}
	q = append(append([]byte(nil), b[:12]...), 64)
	q = append(q, bytes.Repeat([]byte{'a'}, 64)...)
	q = append(q, 0, 0, 1, 0, 1)
	if _, ok := ParseQuery(q); ok {
		t.Error("a label of 64 octets was read")
	}
	q = append(append([]byte(nil), b[:12]...), 1, 'a', 0xc0, 12, 0, 1, 0, 1)
	if _, ok := ParseQuery(q); ok {
		t.Error("a compression pointer was read")
	}
}

// checkParsed checks q, read from b, against miekg/dns's unpacking of b:
// the server would accept it (its default MsgAcceptFunc) and unpack it
// without error into the same question, header bits and OPT.
func checkParsed(t *testing.T, b []byte, q WireQuery) {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("ParseQuery read %x, which miekg/dns does not unpack: %v", b, err)
	}
	if m.Response || m.Opcode != dns.OpcodeQuery || len(m.Question) != 1 || len(m.Answer) != 0 || len(m.Ns) != 0 || len(m.Extra) > 1 {
		t.Fatalf("ParseQuery read a query that is not plain: %v", m)
	}
	mq := m.Question[0]
	if m.Id != q.ID || m.RecursionDesired != q.RD || m.CheckingDisabled != q.CD || mq.Qtype != q.Qtype || mq.Qclass != q.Qclass {
		t.Fatalf("ParseQuery = %+v, miekg/dns %v", q, m)
	}
	if got := string(AppendName(nil, q.Name, false)); got != mq.Name {
		t.Fatalf("name %q, miekg/dns %q", got, mq.Name)
	}
	if got := string(AppendName(nil, q.Name, true)); got != strings.ToLower(mq.Name) {
		t.Fatalf("lowercase name %q, want %q", got, strings.ToLower(mq.Name))
	}
	opt, rcode := Check(m)
	if rcode != dns.RcodeSuccess {
		t.Fatalf("ParseQuery read a query Check answers %s", dns.RcodeToString[rcode])
	}
	if (opt != nil) != q.EDNS || (opt != nil && (opt.Do() != q.DO || opt.UDPSize() != q.UDPSize)) {
		t.Fatalf("ParseQuery EDNS %v DO %v size %d, miekg/dns OPT %v", q.EDNS, q.DO, q.UDPSize, opt)
	}
	if q.ReplySize() != ReplySize(opt, false) {
		t.Fatalf("ReplySize %d, want %d", q.ReplySize(), ReplySize(opt, false))
	}
}

// FuzzParseQuery: whatever ParseQuery reads, miekg/dns unpacks into the
// same query, which the server accepts and Check lets through.
func FuzzParseQuery(f *testing.F) {
	f.Add(packQuery(f, "web.prod.svc.cluster.local.", nil))
	f.Add(packQuery(f, "Web.Example.", withEDNS(1232, true)))
	f.Add(packQuery(f, "a.example.", withEDNS(512, false, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})))
	f.Add(packQuery(f, ".", withEDNS(4096, false, &dns.EDNS0_PADDING{Padding: make([]byte, 3)})))
	f.Add(packQuery(f, `a\.b.example.`, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := ParseQuery(b)
		if ok {
			checkParsed(t, b, q)
		}
	})
}

// TestShape: the shape of a query read from the wire is that of the same
// query unpacked, and queries whose Finish differs have different shapes.
func TestShape(t *testing.T) {
	seen := map[uint32]string{}
	for _, tc := range []struct {
		name string
		size uint16 // 0: no OPT
	}{{"no OPT", 0}, {"OPT 100", 100}, {"OPT 512", 512}, {"OPT 1232", 1232}, {"OPT 4096", 4096}, {"OPT 800", 800}} {
		m := new(dns.Msg)
		m.SetQuestion("a.example.", dns.TypeA)
		if tc.size > 0 {
			m.SetEdns0(tc.size, false)
		}
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		q, ok := ParseQuery(b)
		if !ok {
			t.Fatalf("%s: ParseQuery refused it", tc.name)
		}
		if got, want := q.Shape(), Shape(m.IsEdns0()); got != want {
			t.Errorf("%s: WireQuery.Shape %#x, Shape %#x", tc.name, got, want)
		}
		// 100, 512 and 4096 are 512, 512 and 1232 after ReplySize.
		if other, ok := seen[q.Shape()]; ok && tc.name != "OPT 4096" && tc.name != "OPT 512" {
			t.Errorf("%s has the shape of %s", tc.name, other)
		}
		seen[q.Shape()] = tc.name
	}
	if Shape(nil) == Shape(&dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 512}}) {
		t.Error("no OPT and an OPT of 512 have one shape")
	}
}

func TestRcode(t *testing.T) {
	reply := func(rcode int, edns bool, answers int) []byte {
		m := new(dns.Msg)
		m.SetQuestion("web.prod.svc.cluster.local.", dns.TypeA)
		m.Response = true
		m.Compress = true
		for range answers {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "web.prod.svc.cluster.local.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 0, 0, 1)})
		}
		if edns {
			m.SetEdns0(1232, false)
		}
		m.Rcode = rcode
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want int
	}{
		{"NOERROR", reply(dns.RcodeSuccess, false, 1), dns.RcodeSuccess},
		{"NOERROR with OPT and compressed answers", reply(dns.RcodeSuccess, true, 3), dns.RcodeSuccess},
		{"NXDOMAIN with OPT", reply(dns.RcodeNameError, true, 0), dns.RcodeNameError},
		{"BADVERS: extended bits in the OPT", reply(dns.RcodeBadVers, true, 0), dns.RcodeBadVers},
		{"BADCOOKIE: low and extended bits", reply(dns.RcodeBadCookie, true, 1), dns.RcodeBadCookie},
		{"short", []byte{1, 2, 3}, -1},
		{"truncated after the header", reply(dns.RcodeSuccess, true, 1)[:20], dns.RcodeSuccess},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rcode(tc.b); got != tc.want {
				t.Errorf("Rcode = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestQuestionEnd(t *testing.T) {
	q, _ := new(dns.Msg).SetQuestion("a.example.", dns.TypeAAAA).Pack()
	cases := []struct {
		name string
		b    []byte
		end  int
		ok   bool
	}{
		{"query", q, 12 + 11, true},
		{"no type and class", q[:len(q)-1], 0, false},
		{"cut name", q[:15], 0, false},
		{"no question", append(append([]byte(nil), q[:4]...), make([]byte, 8)...), 0, false},
		{"pointer", append(append([]byte(nil), q[:12]...), 0xc0, 12, 0, 1, 0, 1), 0, false},
		{"header only", q[:12], 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			end, ok := QuestionEnd(tc.b)
			if end != tc.end || ok != tc.ok {
				t.Errorf("QuestionEnd = %d %v, want %d %v", end, ok, tc.end, tc.ok)
			}
		})
	}
}
