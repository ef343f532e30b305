package topology

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		desc    string
		in      []byte
		want    Client
		wantErr string // a part of the error; "" for none
	}{
		{"zone and node", []byte("eu-west-1a\x00node-1.example"), Client{"eu-west-1a", "node-1.example"}, ""},
		{"zone only", []byte("zone-a\x00"), Client{Zone: "zone-a"}, ""},
		{"node only", []byte("\x00node-1"), Client{Node: "node-1"}, ""},
		{"nothing known", []byte{0}, Client{}, ""},
		{"label value chars", []byte("Zone_A.b-1\x00n"), Client{"Zone_A.b-1", "n"}, ""},
		{"longest parts", []byte(strings.Repeat("z", 63) + "\x00" + longNode(253)), Client{strings.Repeat("z", 63), longNode(253)}, ""},
		{"empty payload", nil, Client{}, "separator"},
		{"no separator", []byte("zone-a"), Client{}, "separator"},
		{"zone too long", []byte(strings.Repeat("z", 64) + "\x00n"), Client{}, "zone"},
		{"zone bad start", []byte("-a\x00n"), Client{}, "zone"},
		{"zone bad end", []byte("a.\x00n"), Client{}, "zone"},
		{"zone bad char", []byte("a b\x00n"), Client{}, "zone"},
		{"node too long", []byte("a\x00" + longNode(254)), Client{}, "node"},
		{"node uppercase", []byte("a\x00Node"), Client{}, "node"},
		{"node empty label", []byte("a\x00n..x"), Client{}, "node"},
		{"node long label", []byte("a\x00" + strings.Repeat("n", 64)), Client{}, "node"},
		{"node underscore", []byte("a\x00n_1"), Client{}, "node"},
		{"second separator", []byte("a\x00n\x00m"), Client{}, "node"},
		{"binary zone", []byte("\xff\x00n"), Client{}, "zone"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Decode(tc.in)
			if !testkit.WantErr(t, err, tc.wantErr) {
				return
			}
			if got != tc.want {
				t.Fatalf("Decode(%q) = %+v; want %+v", tc.in, got, tc.want)
			}
			if enc := Encode(got); !bytes.Equal(enc, tc.in) {
				t.Errorf("Encode(%+v) = %q, want %q", got, enc, tc.in)
			}
		})
	}
	if _, err := Decode([]byte("a")); !errors.Is(err, ErrNoSeparator) {
		t.Errorf("Decode without separator: %v, want ErrNoSeparator", err)
	}
}

// longNode is a valid node name of n bytes: labels of up to 62 bytes.
func longNode(n int) string {
	var b strings.Builder
	for rem := n; rem > 0; {
		l := min(62, rem)
		if rem-l == 1 {
			l-- // room for a dot and a last label
		}
		b.WriteString(strings.Repeat("n", l))
		if rem -= l; rem > 0 {
			b.WriteByte('.')
			rem--
		}
	}
	return b.String()
}

func TestLongNode(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 127, 253, 254} {
		s := longNode(n)
		if len(s) != n {
			t.Errorf("longNode(%d) has %d bytes", n, len(s))
		}
		if err := checkNode([]byte(s)); (err == nil) != (n <= MaxNodeLength) {
			t.Errorf("checkNode(longNode(%d)) = %v", n, err)
		}
	}
}

func TestAddTake(t *testing.T) {
	c := Client{Zone: "zone-a", Node: "node-1"}
	tests := []struct {
		desc   string
		msg    func() *dns.Msg
		others int // options other than the topology one, kept by Take
	}{
		{"no OPT", func() *dns.Msg { return new(dns.Msg).SetQuestion("a.example.", dns.TypeA) }, 0},
		{"OPT without options", func() *dns.Msg {
			return new(dns.Msg).SetQuestion("a.example.", dns.TypeA).SetEdns0(4096, true)
		}, 0},
		{"other options", func() *dns.Msg {
			m := new(dns.Msg).SetQuestion("a.example.", dns.TypeA).SetEdns0(1232, false)
			o := m.IsEdns0()
			o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("ns.svc.cluster.local")}, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
			return m
		}, 2},
		{"replaced", func() *dns.Msg {
			m := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
			Add(m, DefaultOptionCode, Client{Zone: "old"})
			return m
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := tc.msg()
			hadOPT := m.IsEdns0() != nil
			Add(m, DefaultOptionCode, c)
			opt := m.IsEdns0()
			if opt == nil {
				t.Fatal("no OPT after Add")
			}
			if !hadOPT && opt.UDPSize() != dnsmsg.EDNSSize {
				t.Errorf("added OPT advertises %d, want %d", opt.UDPSize(), dnsmsg.EDNSSize)
			}
			if n := countCode(m, DefaultOptionCode); n != 1 {
				t.Fatalf("%d topology options after Add, want 1", n)
			}
			// Through the wire, as the cluster DNS receives it.
			got := testkit.ThroughWire(t, m)
			taken, ok := Take(got, DefaultOptionCode)
			if !ok || taken != c {
				t.Fatalf("Take = %+v, %v; want %+v", taken, ok, c)
			}
			if n := countCode(got, DefaultOptionCode); n != 0 {
				t.Errorf("%d topology options after Take", n)
			}
			if n := len(got.IsEdns0().Option); n != tc.others {
				t.Errorf("%d options left after Take, want %d", n, tc.others)
			}
			if _, ok := Take(got, DefaultOptionCode); ok {
				t.Error("second Take found an option")
			}
		})
	}
}

func countCode(m *dns.Msg, code uint16) int {
	n := 0
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if o.Option() == code {
				n++
			}
		}
	}
	return n
}

func TestTakeMalformed(t *testing.T) {
	tests := []struct {
		desc string
		data [][]byte // payloads of the options of the code, in order
		want Client
		ok   bool
	}{
		{"malformed", [][]byte{[]byte("no separator")}, Client{}, false},
		{"empty", [][]byte{nil}, Client{}, false},
		{"first wins", [][]byte{[]byte("a\x00n1"), []byte("b\x00n2")}, Client{"a", "n1"}, true},
		{"first malformed", [][]byte{[]byte("bad zone!\x00"), []byte("b\x00n2")}, Client{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := new(dns.Msg).SetQuestion("a.example.", dns.TypeA).SetEdns0(1232, false)
			opt := m.IsEdns0()
			for _, d := range tc.data {
				opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: DefaultOptionCode, Data: d})
			}
			opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("x")})
			got, ok := Take(m, DefaultOptionCode)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Take = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if n := countCode(m, DefaultOptionCode); n != 0 {
				t.Errorf("%d topology options left", n)
			}
			if n := len(m.IsEdns0().Option); n != 1 {
				t.Errorf("%d other options left, want 1", n)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, that what it accepts
// encodes back to the same bytes, and that Take agrees with it.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "\x00", "zone-a\x00node-1", "a\x00b\x00c", "\xff", strings.Repeat("z", 64) + "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			if c != (Client{}) {
				t.Fatalf("Decode(%q) = %+v with error %v", b, c, err)
			}
		} else if enc := Encode(c); !bytes.Equal(enc, b) {
			t.Fatalf("Encode(Decode(%q)) = %q", b, enc)
		}
		m := new(dns.Msg).SetQuestion("a.example.", dns.TypeA).SetEdns0(1232, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: DefaultOptionCode, Data: b})
		got, ok := Take(m, DefaultOptionCode)
		if ok != (err == nil) || got != c {
			t.Fatalf("Take = %+v, %v; Decode = %+v, %v", got, ok, c, err)
		}
		if err == nil {
			// What Decode accepts survives Add, the wire and Take.
			q := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
			Add(q, DefaultOptionCode, c)
			if got, ok := Take(testkit.ThroughWire(t, q), DefaultOptionCode); !ok || got != c {
				t.Fatalf("round trip of %+v: %+v, %v", c, got, ok)
			}
		}
	})
}

func TestParseScoped(t *testing.T) {
	const zone = "cluster.local."
	tests := []struct {
		name string
		want Scoped
		ok   bool
	}{
		{"za.pin._zone.web.ns.svc.cluster.local.", Scoped{Zone: "za", Base: "web.ns.svc.cluster.local."}, true},
		{"za.prefer._zone.web.ns.svc.cluster.local.", Scoped{Zone: "za", Prefer: true, Base: "web.ns.svc.cluster.local."}, true},
		{"corp.example.com.pin._zone.web.ns.svc.cluster.local.", Scoped{Zone: "corp.example.com", Base: "web.ns.svc.cluster.local."}, true},
		{"pin._zone.web.ns.svc.cluster.local.", Scoped{}, false},      // no topology zone
		{"za.near._zone.web.ns.svc.cluster.local.", Scoped{}, false},  // unknown directive
		{"za.pin.zone.web.ns.svc.cluster.local.", Scoped{}, false},    // no _zone
		{"za.pin._zone.web.ns.pod.cluster.local.", Scoped{}, false},   // pods have none
		{"za.pin._zone.web.ns.svc.cluster.example.", Scoped{}, false}, // another zone
		{"web-0.web.ns.svc.cluster.local.", Scoped{}, false},          // an endpoint name
		{"za.pin._zone.web.ns.svc.other.svc.cluster.local.", Scoped{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseScoped(tt.name, zone)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("ParseScoped(%s) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
