package nodelocal

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

func ep(addr, zone string, ready bool) Endpoint {
	return Endpoint{Addr: netip.MustParseAddrPort(addr), TopologyZone: zone, Ready: ready}
}

// TestClusterUpstreamsOrder: the node's zone's ready endpoints, then the
// other ready ones, then the Service addresses.
func TestClusterUpstreamsOrder(t *testing.T) {
	static := []string{"10.96.0.11:53"}
	tests := []struct {
		name  string
		zone  string
		eps   []Endpoint
		first []string // the order's head, as a set
		then  []string // what follows it, as a set
		rel   map[string]string
		local int
	}{
		{"no endpoints", "a", nil, nil, nil, map[string]string{"10.96.0.11:53": relService}, 0},
		{"same zone first", "a",
			[]Endpoint{ep("10.0.2.1:53", "b", true), ep("10.0.1.1:53", "a", true), ep("10.0.1.2:53", "a", true)},
			[]string{"10.0.1.1:53", "10.0.1.2:53"}, []string{"10.0.2.1:53"},
			map[string]string{"10.0.1.1:53": relSame, "10.0.2.1:53": relOther, "10.96.0.11:53": relService}, 2},
		{"zone-local not ready", "a",
			[]Endpoint{ep("10.0.1.1:53", "a", false), ep("10.0.2.1:53", "b", true)},
			[]string{"10.0.2.1:53"}, nil, map[string]string{"10.0.2.1:53": relOther}, 0},
		{"zone unknown", "",
			[]Endpoint{ep("10.0.1.1:53", "a", true), ep("10.0.2.1:53", "b", true)},
			nil, []string{"10.0.1.1:53", "10.0.2.1:53"}, map[string]string{"10.0.1.1:53": relOther}, 0},
		{"endpoint without zone", "a",
			[]Endpoint{ep("10.0.3.1:53", "", true), ep("10.0.1.1:53", "a", true)},
			[]string{"10.0.1.1:53"}, []string{"10.0.3.1:53"}, nil, 1},
		{"duplicate address", "a",
			[]Endpoint{ep("10.0.1.1:53", "a", true), ep("10.0.1.1:53", "a", true)},
			[]string{"10.0.1.1:53"}, nil, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newClusterUpstreams(static, "node-1")
			u.set(tc.zone, tc.eps)
			got := u.Upstreams()
			want := len(tc.first) + len(tc.then) + len(static)
			if len(got) != want || got[len(got)-1] != static[0] {
				t.Fatalf("order %v: want %d upstreams ending with %v", got, want, static)
			}
			if head := got[:len(tc.first)]; !sameSet(head, tc.first) {
				t.Errorf("order %v: head %v, want %v", got, head, tc.first)
			}
			if mid := got[len(tc.first) : len(got)-1]; !sameSet(mid, tc.then) {
				t.Errorf("order %v: then %v, want %v", got, mid, tc.then)
			}
			for a, r := range tc.rel {
				if g := u.relation(a); g != r {
					t.Errorf("relation(%s) = %s, want %s", a, g, r)
				}
			}
			if n := u.local; n != nil {
				t.Fatal("no gauge expected")
			}
			if got := countRel(u, relSame); got != tc.local {
				t.Errorf("%d zone-local upstreams, want %d", got, tc.local)
			}
		})
	}
}

// TestClusterUpstreamsSpread: the order within a zone is fixed for a
// node and differs between nodes, so that a zone's nodes spread over its
// pods.
func TestClusterUpstreamsSpread(t *testing.T) {
	var eps []Endpoint
	for _, a := range []string{"10.0.1.1:53", "10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:53"} {
		eps = append(eps, ep(a, "a", true))
	}
	firsts := map[string]bool{}
	for i := range 32 {
		node := "node-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		u := newClusterUpstreams(nil, node)
		u.set("a", eps)
		again := newClusterUpstreams(nil, node)
		rev := slices.Clone(eps)
		slices.Reverse(rev)
		again.set("a", rev)
		if !slices.Equal(u.Upstreams(), again.Upstreams()) {
			t.Fatalf("%s: order %v, then %v for the same endpoints", node, u.Upstreams(), again.Upstreams())
		}
		firsts[u.Upstreams()[0]] = true
	}
	if len(firsts) < 3 {
		t.Errorf("32 nodes start with %d of 4 pods", len(firsts))
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func countRel(u *clusterUpstreams, rel string) int {
	n := 0
	for _, a := range u.Upstreams() {
		if u.relation(a) == rel {
			n++
		}
	}
	return n
}

func TestEndpointsOf(t *testing.T) {
	no, tcp, udp := false, corev1.ProtocolTCP, corev1.ProtocolUDP
	p := func(n int32) *int32 { return &n }
	zone := func(z string) *string { return &z }
	in := []*discoveryv1.EndpointSlice{
		{Ports: []discoveryv1.EndpointPort{{Port: p(5353), Protocol: &udp}, {Port: p(1053), Protocol: &tcp}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.1.1"}, Zone: zone("a")},
				{Addresses: []string{"10.0.2.1"}, Zone: zone("b"), Conditions: discoveryv1.EndpointConditions{Ready: &no}},
				{Addresses: []string{"not-an-ip"}},
			}},
		{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}},
	}
	want := []Endpoint{ep("10.0.1.1:1053", "a", true), ep("10.0.2.1:1053", "b", false), ep("[fd00::1]:53", "", true)}
	if got := endpointsOf(in); !slices.Equal(got, want) {
		t.Errorf("endpointsOf = %v, want %v", got, want)
	}
}

// TestWithTopology: the option is added to a copy, replacing one of the
// code; the query given is not changed.
func TestWithTopology(t *testing.T) {
	q := new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA).SetEdns0(1232, false)
	opt := q.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("default.svc.cluster.local")},
		&dns.EDNS0_LOCAL{Code: 65002, Data: []byte("spoofed\x00node-9")})
	before := q.String()
	c := topology.Client{Zone: "zone-a", Node: "node-1"}
	out := withTopology(q, 65002, c)
	if q.String() != before {
		t.Errorf("query changed:\n%s\nwas:\n%s", q, before)
	}
	got, ok := topology.Take(out, 65002)
	if !ok || got != c {
		t.Errorf("option %+v, %v; want %+v", got, ok, c)
	}
	if n := len(out.IsEdns0().Option); n != 1 {
		t.Errorf("%d options besides the topology one, want the autopath one", n)
	}
}
