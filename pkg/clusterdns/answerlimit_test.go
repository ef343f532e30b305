package clusterdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsmsg"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// bigEndpoints is the endpoint count of the headless Service ns/big of
// limitStore: its A answer fits neither 512 nor 1232 bytes.
const bigEndpoints = 120

// limitStore has the headless Services ns/big (bigEndpoints IPv4 and 30
// IPv6 endpoints) and ns/small (3 endpoints), and the ExternalName
// ns/alias pointing at big.
func limitStore(tb testing.TB) *store.Store {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		tb.Fatal(err)
	}
	var big, small []store.Endpoint
	for i := range bigEndpoints {
		big = append(big, store.Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(i%250 + 1)})}, Ready: true})
	}
	for i := range 30 {
		big = append(big, store.Endpoint{Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("fd00::%x", i+1))}, Ready: true})
	}
	for i := range 3 {
		small = append(small, store.Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 245, 0, byte(i + 1)})}, Ready: true})
	}
	st.SetService(store.Service{Namespace: "ns", Name: "big", Type: store.Headless})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "big-1", Service: "big", Endpoints: big})
	st.SetService(store.Service{Namespace: "ns", Name: "small", Type: store.Headless})
	st.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "small-1", Service: "small", Endpoints: small})
	st.SetService(store.Service{Namespace: "ns", Name: "alias", Type: store.ExternalName, ExternalName: "big.ns.svc.cluster.local."})
	st.Publish()
	return st
}

func limitHandler(t *testing.T, limit int, lb bool) *Handler {
	t.Helper()
	ap, err := WithAutopath(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewHandler("cluster.local", limitStore(t), WithUDPAnswerLimit(limit), WithLoadBalance(lb), ap)
}

// askLimited sends req to h as a UDP (through AnswerWire first when wire is set,
// as the listener does) or TCP client and returns the reply.
func askLimited(t *testing.T, h *Handler, req *dns.Msg, tcp, wire bool) *dns.Msg {
	t.Helper()
	if wire && !tcp {
		if b, ok := h.AnswerWire(nil, mustPack(t, req)); ok {
			m := new(dns.Msg)
			if err := m.Unpack(b); err != nil {
				t.Fatalf("unpack the AnswerWire reply: %v", err)
			}
			return m
		}
	}
	w := &fakeWriter{tcp: tcp}
	h.ServeDNS(w, req)
	if w.err != nil || w.msg == nil {
		t.Fatalf("%v: no reply (%v)", req.Question, w.err)
	}
	return w.msg
}

// addrsOf are the addresses of the A and AAAA records of m's answer, and
// how many other records it has.
func addrsOf(m *dns.Msg) (addrs []string, other int) {
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			addrs = append(addrs, rr.A.String())
		case *dns.AAAA:
			addrs = append(addrs, rr.AAAA.String())
		default:
			other++
		}
	}
	return addrs, other
}

// TestUDPAnswerLimit: over UDP an A or AAAA RRset longer than the limit
// is cut to the limit, TC clear, on every path (zone, ExternalName chase,
// autopath, reply cache, wire answers); over TCP and below the limit the
// answer is whole; without the limit a big answer is truncated as
// before.
func TestUDPAnswerLimit(t *testing.T) {
	const limit = 24
	ap := "big.search.ns.cluster.local.ap.k8s.io."
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		limit  int
		size   uint16 // EDNS0 size; 0: none
		tcp    bool
		want   int // addresses
		cnames int
		tc     bool
	}{
		{name: "A over UDP", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, limit: limit, want: limit},
		{name: "A over UDP with EDNS0", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, limit: limit, size: 1232, want: limit},
		{name: "AAAA over UDP with EDNS0", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeAAAA, limit: limit, size: 1232, want: limit},
		{name: "AAAA over UDP, over 512 bytes", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeAAAA, limit: limit, want: 16, tc: true},
		{name: "A over TCP", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, limit: limit, tcp: true, want: bigEndpoints},
		{name: "below the limit", qname: "small.ns.svc.cluster.local.", qtype: dns.TypeA, limit: limit, want: 3},
		{name: "ExternalName chase", qname: "alias.ns.svc.cluster.local.", qtype: dns.TypeA, limit: limit, want: limit, cnames: 1},
		{name: "autopath", qname: ap, qtype: dns.TypeA, limit: limit, want: limit, cnames: 1},
		{name: "autopath over TCP", qname: ap, qtype: dns.TypeA, limit: limit, tcp: true, want: bigEndpoints, cnames: 1},
		{name: "limit too big for 512 bytes", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, limit: 100, want: 29, tc: true},
		{name: "off", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, want: 29, tc: true},
		{name: "off with EDNS0", qname: "big.ns.svc.cluster.local.", qtype: dns.TypeA, size: 1232, want: 73, tc: true},
	}
	for _, tt := range tests {
		for _, lb := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s lb=%v", tt.name, lb), func(t *testing.T) {
				h := limitHandler(t, tt.limit, lb)
				req := wireQuery(tt.qname, tt.qtype, true, false, tt.size, false)
				// The miss, then cache hits from ServeDNS and the wire.
				for i, wire := range []bool{false, false, true, true} {
					m := askLimited(t, h, req, tt.tcp, wire)
					addrs, other := addrsOf(m)
					if len(addrs) != tt.want || other != tt.cnames || m.Truncated != tt.tc || m.Rcode != dns.RcodeSuccess {
						t.Fatalf("reply %d (wire %v): %d addresses, %d other records, TC %v, rcode %d; want %d, %d, TC %v\n%v",
							i, wire, len(addrs), other, m.Truncated, m.Rcode, tt.want, tt.cnames, tt.tc, m)
					}
					if dup := len(addrs) - len(slices.Compact(slices.Sorted(slices.Values(addrs)))); dup != 0 {
						t.Fatalf("reply %d: %d addresses twice", i, dup)
					}
				}
			})
		}
	}
}

// TestUDPAnswerLimitCovers: ceil(n/limit) consecutive UDP replies of a
// name hand out every one of its n endpoints, from the miss path, from the
// reply cache (ServeDNS and the wire) and from autopath (never cached).
func TestUDPAnswerLimitCovers(t *testing.T) {
	for _, limit := range []int{24, 7, 50} {
		for _, tc := range []struct {
			name  string
			qname string
			wire  bool
		}{
			{"zone", "big.ns.svc.cluster.local.", false},
			{"zone, wire", "big.ns.svc.cluster.local.", true},
			{"ExternalName, wire", "alias.ns.svc.cluster.local.", true},
			{"autopath", "big.search.ns.cluster.local.ap.k8s.io.", true},
		} {
			for _, lb := range []bool{false, true} {
				t.Run(fmt.Sprintf("limit %d %s lb=%v", limit, tc.name, lb), func(t *testing.T) {
					h := limitHandler(t, limit, lb)
					req := wireQuery(tc.qname, dns.TypeA, true, false, 1232, false)
					seen := map[string]int{}
					for range (bigEndpoints + limit - 1) / limit {
						addrs, _ := addrsOf(askLimited(t, h, req, false, tc.wire))
						if len(addrs) != limit {
							t.Fatalf("%d addresses, want %d", len(addrs), limit)
						}
						for _, a := range addrs {
							seen[a]++
						}
					}
					if len(seen) != bigEndpoints {
						t.Errorf("%d of %d endpoints handed out in %d replies", len(seen), bigEndpoints, (bigEndpoints+limit-1)/limit)
					}
				})
			}
		}
	}
}

// TestWindowMatchesLimitAnswer: a cached reply's window (windowReply)
// gives, hit after hit, the bytes of the reply made with
// dnsmsg.LimitAnswer at the same counter, never longer than MaxLen says;
// replies whose window cannot be served safely or could outgrow the
// client's size get none.
func TestWindowMatchesLimitAnswer(t *testing.T) {
	const limit = 3
	h := NewHandler("cluster.local", limitStore(t), WithUDPAnswerLimit(limit))
	run := func(owner string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s 5 IN A 10.0.0.%d", owner, i+1))
		}
		return out
	}
	tests := []struct {
		name   string
		qname  string
		answer []string
		size   int
		plan   bool
	}{
		{"A run", "db.ns.svc.cluster.local.", run("db.ns.svc.cluster.local.", 7), 512, true},
		{"CNAME then A run", "alias.ns.svc.cluster.local.",
			append([]string{"alias.ns.svc.cluster.local. 5 IN CNAME db.ns.svc.cluster.local."}, run("db.ns.svc.cluster.local.", 5)...), 512, true},
		{"AAAA run", "db.ns.svc.cluster.local.", []string{"db.ns.svc.cluster.local. 5 IN AAAA fd00::1", "db.ns.svc.cluster.local. 5 IN AAAA fd00::2",
			"db.ns.svc.cluster.local. 5 IN AAAA fd00::3", "db.ns.svc.cluster.local. 5 IN AAAA fd00::4"}, 512, true},
		{"at the limit", "db.ns.svc.cluster.local.", run("db.ns.svc.cluster.local.", 3), 512, false},
		{"two runs over the limit", "db.ns.svc.cluster.local.", append(run("db.ns.svc.cluster.local.", 4), run("x.ns.svc.cluster.local.", 4)...), 512, false},
		{"pointer into the run", "x.example.", append([]string{"x.example. 5 IN CNAME y.example."}, run("z.example.", 5)...), 512, false},
		{"window over the size", "db.ns.svc.cluster.local.", run("db.ns.svc.cluster.local.", 7), 80, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := packedReply(t, tt.qname, tt.answer, nil)
			const c0 = 5
			cut := m.Copy()
			cut.Answer = dnsmsg.LimitAnswer(m.Answer, limit, c0)
			w, ok := h.windowReply(cut, &udpCut{full: m.Answer, c: c0}, tt.size)
			if ok != tt.plan {
				t.Fatalf("windowReply ok = %v, want %v", ok, tt.plan)
			}
			if !ok {
				return
			}
			longest := 0
			defer func() {
				if longest != w.MaxLen() {
					t.Errorf("the longest hit is %d bytes, MaxLen %d", longest, w.MaxLen())
				}
			}()
			for c := uint32(c0 + 1); c < c0+12; c++ {
				got := w.AppendTo(nil, m.Id, m.RecursionDesired, m.CheckingDisabled)
				longest = max(longest, len(got))
				cut := m.Copy()
				cut.Answer = dnsmsg.LimitAnswer(m.Answer, limit, c)
				want, err := cut.Pack()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					var gm dns.Msg
					err := gm.Unpack(got)
					t.Fatalf("hit %d: the window's bytes (%v) differ from the cut reply's:\n%v\nwant:\n%v", c, err, &gm, cut)
				}
			}
		})
	}
}
