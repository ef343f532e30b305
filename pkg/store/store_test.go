package store

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestDashedIP(t *testing.T) {
	cases := []struct {
		ip, label string
	}{
		{"10.1.2.3", "10-1-2-3"},
		{"::ffff:10.1.2.3", "10-1-2-3"},
		{"fd00::1", "fd00--1"},
		{"2001:db8:0:1::ab", "2001-db8-0-1--ab"},
		{"::1", "--1"},
	}
	for _, tc := range cases {
		t.Run(tc.ip, func(t *testing.T) {
			a := netip.MustParseAddr(tc.ip)
			if got := DashedIP(a); got != tc.label {
				t.Fatalf("DashedIP = %q, want %q", got, tc.label)
			}
			back, ok := ParseDashedIP(tc.label)
			if !ok || back != a.Unmap() {
				t.Fatalf("ParseDashedIP(%q) = %v %v, want %v", tc.label, back, ok, a.Unmap())
			}
		})
	}
	for ip, want := range map[string]string{"fd00::": "fd00--0", "fd00:10:244::": "fd00-10-244--0", "fd00::5": "fd00--5", "10.1.2.0": "10-1-2-0"} {
		a := netip.MustParseAddr(ip)
		if got := EndpointDashedIP(a); got != want {
			t.Errorf("EndpointDashedIP(%s) = %q, want %q", ip, got, want)
		}
		if back, ok := ParseDashedIP(want); !ok || back != a {
			t.Errorf("ParseDashedIP(%q) = %v %v, want %v", want, back, ok, a)
		}
	}
	for _, bad := range []string{"", "abc", "10-1-2", "10-1-2-300", "1-2-3-4-5", "fd00-zz--1"} {
		if a, ok := ParseDashedIP(bad); ok {
			t.Errorf("ParseDashedIP(%q) = %v, want failure", bad, a)
		}
	}
}

func TestReverseName(t *testing.T) {
	cases := []struct{ ip, want string }{
		{"10.96.0.1", "1.0.96.10.in-addr.arpa."},
		{"fd00::10", "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."},
	}
	for _, tc := range cases {
		if got := ReverseName(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("ReverseName(%s) = %q, want %q", tc.ip, got, tc.want)
		}
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestBuild(t *testing.T) {
	st, err := New(Options{Zone: "Cluster.Local.", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot() != nil {
		t.Fatal("snapshot before publish")
	}
	st.SetService(Service{Namespace: "ns", Name: "hl", Type: Headless})
	st.SetEndpointSlice(EndpointSlice{Namespace: "ns", Name: "a", Service: "hl", Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 81}},
		Endpoints: []Endpoint{{Addresses: addrs("10.0.0.2"), Ready: true}, {Addresses: addrs("10.0.0.1"), Hostname: "x", Ready: true}}})
	st.SetEndpointSlice(EndpointSlice{Namespace: "ns", Name: "b", Service: "hl", Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}},
		Endpoints: []Endpoint{{Addresses: addrs("10.0.0.1"), Hostname: "x", Ready: true}, {Addresses: addrs("10.0.0.3")}}})
	first := st.Publish()
	st.SetService(Service{Namespace: "ns", Name: "later", Type: ClusterIP, ClusterIPs: addrs("10.96.0.9")})
	snap := st.Publish()
	if snap.Serial <= first.Serial {
		t.Errorf("serial %d not above %d", snap.Serial, first.Serial)
	}
	if _, ok := first.Lookup("later.ns.svc.cluster.local."); ok {
		t.Errorf("an old snapshot changed after a publish")
	}

	n, ok := snap.Lookup("hl.ns.svc.cluster.local.")
	if !ok || !slices.Equal(n.A(), addrs("10.0.0.1", "10.0.0.2")) {
		t.Fatalf("hl = %+v, want the two ready addresses once each", n)
	}
	srv, _ := snap.Lookup("_http._tcp.hl.ns.svc.cluster.local.")
	if srv == nil || len(srv.SRV()) != 2 || srv.SRV()[0].Target != "10-0-0-2.hl.ns.svc.cluster.local." || srv.SRV()[1].Target != "x.hl.ns.svc.cluster.local." {
		t.Fatalf("SRV = %+v", srv)
	}
	for _, ent := range []string{"_tcp.hl.ns.svc.cluster.local.", "ns.svc.cluster.local.", "svc.cluster.local.", "pod.cluster.local.", "cluster.local."} {
		n, ok := snap.Lookup(ent)
		if !ok || len(n.A())+len(n.SRV())+len(n.PTR()) != 0 {
			t.Errorf("%s = %+v %v, want an empty non-terminal", ent, n, ok)
		}
	}
	for _, absent := range []string{"10-0-0-3.hl.ns.svc.cluster.local.", "_81._tcp.hl.ns.svc.cluster.local.", "ns.pod.cluster.local."} {
		if _, ok := snap.Lookup(absent); ok {
			t.Errorf("%s exists", absent)
		}
	}
	if p, _ := snap.Lookup("1.0.0.10.in-addr.arpa."); p == nil || !slices.Equal(p.PTR(), []string{"x.hl.ns.svc.cluster.local."}) {
		t.Errorf("PTR = %+v", p)
	}
	if snap.Counts.Services != 2 || snap.Counts.Endpoints != 2 || snap.Counts.EndpointSlices != 2 {
		t.Errorf("counts = %+v", snap.Counts)
	}
}

// TestBuildIPv6SubnetZero: an endpoint at an IPv6 address ending in "::"
// is named fd00-1--0 (no label ends in '-'), its PTR points there, and a
// pod at that address keeps fd00-1-- (CoreDNS's names for both).
func TestBuildIPv6SubnetZero(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local.", TTL: 5, Pods: PodsVerified})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(Service{Namespace: "ns", Name: "hl", Type: Headless})
	st.SetEndpointSlice(EndpointSlice{Namespace: "ns", Name: "v6", Service: "hl", Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}},
		Endpoints: []Endpoint{{Addresses: addrs("fd00:1::"), Ready: true}}})
	st.SetPod(Pod{Namespace: "ns", Name: "p", IPs: addrs("fd00:1::")})
	snap := st.Publish()
	if n, ok := snap.Lookup("fd00-1--0.hl.ns.svc.cluster.local."); !ok || !slices.Equal(n.AAAA(), addrs("fd00:1::")) {
		t.Errorf("endpoint name = %+v %v", n, ok)
	}
	if srv, _ := snap.Lookup("_http._tcp.hl.ns.svc.cluster.local."); srv == nil || len(srv.SRV()) != 1 || srv.SRV()[0].Target != "fd00-1--0.hl.ns.svc.cluster.local." {
		t.Errorf("SRV = %+v", srv)
	}
	if p, _ := snap.Lookup(ReverseName(netip.MustParseAddr("fd00:1::"))); p == nil || !slices.Equal(p.PTR(), []string{"fd00-1--0.hl.ns.svc.cluster.local."}) {
		t.Errorf("PTR = %+v", p)
	}
	if n, ok := snap.Lookup("fd00-1--.ns.pod.cluster.local."); !ok || !slices.Equal(n.AAAA(), addrs("fd00:1::")) {
		t.Errorf("pod name = %+v %v", n, ok)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Zone: ""}, {Zone: "a..b"}, {Zone: ".x"}, {Zone: "cluster.local", TTL: 3601}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := ParsePodMode("sometimes"); err == nil {
		t.Error("ParsePodMode accepted a bad mode")
	}
}

// TestSetOptions: new options apply to the records held at the next
// Publish (a config reload), earlier snapshots keep theirs, and a bad
// option or another zone is refused with the running options kept.
func TestSetOptions(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(Service{Namespace: "a", Name: "web", Type: ClusterIP, ClusterIPs: addrs("10.96.0.1")})
	st.SetService(Service{Namespace: "b", Name: "web", Type: ClusterIP, ClusterIPs: addrs("10.96.0.2")})
	st.SetPod(Pod{Namespace: "a", Name: "p", IPs: addrs("10.1.0.1")})
	before := st.Publish()
	if err := st.SetOptions(Options{Zone: "Cluster.Local.", TTL: 30, Pods: PodsVerified, Namespaces: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	after := st.Publish()
	if n, ok := after.Lookup("web.a.svc.cluster.local."); !ok || n.TTL != 30 {
		t.Errorf("web.a after SetOptions = %+v %v, want TTL 30", n, ok)
	}
	if _, ok := after.Lookup("web.b.svc.cluster.local."); ok {
		t.Error("namespace b is filtered out but still served")
	}
	if _, ok := after.Lookup("10-1-0-1.a.pod.cluster.local."); !ok {
		t.Error("pods verified: the pod's name is missing")
	}
	if n, ok := before.Lookup("web.b.svc.cluster.local."); !ok || n.TTL != 5 {
		t.Errorf("the earlier snapshot changed: %+v %v", n, ok)
	}
	for _, bad := range []Options{{Zone: "other.local", TTL: 5}, {Zone: "cluster.local", TTL: MaxTTL + 1}} {
		if err := st.SetOptions(bad); err == nil {
			t.Errorf("SetOptions(%+v) accepted", bad)
		}
	}
	if got := st.Options(); got.TTL != 30 {
		t.Errorf("a refused SetOptions changed the options: %+v", got)
	}
}

// TestKeys: Keys lists what the store holds of each kind, deletes
// included.
func TestKeys(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(Service{Namespace: "a", Name: "s1", Type: Headless})
	st.SetService(Service{Namespace: "b", Name: "s2", Type: Headless})
	st.DeleteService("b", "s2")
	st.SetEndpointSlice(EndpointSlice{Namespace: "a", Name: "s1-x", Service: "s1"})
	st.SetPod(Pod{Namespace: "a", Name: "p", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}})
	st.SetNamespace(Namespace{Name: "a"})
	st.SetNamespace(Namespace{Name: "b"})
	for _, tc := range []struct {
		kind ObjectKind
		want []Key
	}{
		{KindService, []Key{{"a", "s1"}}},
		{KindEndpointSlice, []Key{{"a", "s1-x"}}},
		{KindPod, []Key{{"a", "p"}}},
		{KindNamespace, []Key{{"", "a"}, {"", "b"}}},
	} {
		got := slices.Collect(st.Keys(tc.kind))
		slices.SortFunc(got, func(x, y Key) int { return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("Keys(%d) = %v, want %v", tc.kind, got, tc.want)
		}
	}
}
