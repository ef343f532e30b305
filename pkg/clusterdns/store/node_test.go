package store

import (
	"net/netip"
	"slices"
	"testing"
)

// TestNodeRecords adds records of every kind in every order, through each
// room a node is made with, and reads each kind back unmixed.
func TestNodeRecords(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	b1, b2 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("::ffff:10.0.0.3")
	adds := map[string]func(n *Node){
		"aaaa":  func(n *Node) { addAddr(n, b1) },
		"a":     func(n *Node) { addAddr(n, a1); addAddr(n, a2); addAddr(n, a1) },
		"v4map": func(n *Node) { addAddr(n, b2) },
		"ptr":   func(n *Node) { addPTR(n, "z."); addPTR(n, "y."); addPTR(n, "z.") },
		"txt":   func(n *Node) { addTXT(n, "t1", "t2") },
		"cname": func(n *Node) { setCNAME(n, "old."); setCNAME(n, "c.") },
		"srv":   func(n *Node) { addSRV(n, SRV{Port: 1, Target: "s."}); takeSRV(n, []SRV{{Port: 2, Target: "s."}}) },
	}
	orders := [][]string{
		{"aaaa", "a", "v4map", "ptr", "txt", "cname", "srv"},
		{"cname", "txt", "srv", "ptr", "a", "aaaa", "v4map"},
		{"txt", "ptr", "v4map", "srv", "aaaa", "cname", "a"},
	}
	for _, r := range []room{roomNone, roomAddr, roomPTR, roomSRV} {
		for _, order := range orders {
			n := newNode(7, r)
			for _, k := range order {
				adds[k](n)
			}
			sortRecords(n)
			check := func(what string) {
				t.Helper()
				want := map[string]bool{
					"A":     slices.Equal(n.A(), []netip.Addr{a2, a1, b2.Unmap()}),
					"AAAA":  slices.Equal(n.AAAA(), []netip.Addr{b1}),
					"PTR":   slices.Equal(n.PTR(), []string{"y.", "z."}),
					"TXT":   slices.Equal(n.TXT(), []string{"t1", "t2"}),
					"CNAME": n.CNAME() == "c.",
					"SRV":   slices.Equal(n.SRV(), []SRV{{Port: 1, Target: "s."}, {Port: 2, Target: "s."}}),
					"TTL":   n.TTL == 7,
				}
				for k, ok := range want {
					if !ok {
						t.Errorf("room %d, order %v, %s: %s wrong: A %v AAAA %v PTR %v TXT %v CNAME %q SRV %v",
							r, order, what, k, n.A(), n.AAAA(), n.PTR(), n.TXT(), n.CNAME(), n.SRV())
					}
				}
			}
			check("built")
			c := cloneNode(n)
			if !equalNode(c, n) {
				t.Errorf("room %d, order %v: clone differs", r, order)
			}
			// The clone shares no slice: writing over its records and
			// adding more leaves n alone.
			c.addrs[0], c.strs[0], c.srv[0] = netip.MustParseAddr("10.9.9.8"), "w.", SRV{Port: 9}
			addAddr(c, netip.MustParseAddr("10.9.9.9"))
			addPTR(c, "x.")
			addSRV(c, SRV{Port: 3})
			setCNAME(c, "d.")
			if equalNode(c, n) {
				t.Errorf("room %d, order %v: the changed clone equals its source", r, order)
			}
			check("after the clone changed")
		}
	}
	if n := newNode(5, roomNone); len(n.A())+len(n.AAAA())+len(n.PTR())+len(n.TXT())+len(n.SRV()) != 0 || n.CNAME() != "" {
		t.Errorf("an empty node has records")
	}
}

// TestRebuildPTRSet: the PTR address set a rebuild gathers from its builds
// is the set of PTR names of the snapshot, read back (IPv4, IPv6, 4in6
// and zoned addresses, an address two Services share, endpoints and
// ClusterIPs).
func TestRebuildPTRSet(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified})
	if err != nil {
		t.Fatal(err)
	}
	ips := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	st.SetService(Service{Namespace: "a", Name: "v4", Type: ClusterIP, ClusterIPs: ips("10.96.0.1")})
	st.SetService(Service{Namespace: "a", Name: "dual", Type: ClusterIP, ClusterIPs: ips("10.96.0.2", "fd00::2")})
	st.SetService(Service{Namespace: "b", Name: "mapped", Type: ClusterIP, ClusterIPs: ips("::ffff:10.96.0.3")})
	st.SetService(Service{Namespace: "b", Name: "shared", Type: ClusterIP, ClusterIPs: ips("10.96.0.1")})
	st.SetService(Service{Namespace: "b", Name: "hl", Type: Headless})
	st.SetEndpointSlice(EndpointSlice{Namespace: "b", Name: "hl-1", Service: "hl", Endpoints: []Endpoint{
		{Addresses: ips("10.0.0.1"), Ready: true}, {Addresses: ips("fe80::1%eth0"), Ready: true},
		{Addresses: ips("10.0.0.2"), Ready: false}}})
	st.SetPod(Pod{Namespace: "b", Name: "p", IPs: ips("10.0.0.9")})
	snap := st.Publish()

	var want []netip.Addr
	snap.Names(func(name string, n *Node) {
		if a, ok := reverseAddr(name); ok && len(n.PTR()) > 0 {
			want = append(want, a)
		}
	})
	slices.SortFunc(want, netip.Addr.Compare)
	var got []netip.Addr
	for it := snap.ptrs.Iterator(); !it.Done(); {
		a, _, _ := it.Next()
		got = append(got, a)
	}
	if len(want) != 6 || !slices.Equal(got, want) {
		t.Errorf("rebuild's PTR set %v, the snapshot's PTR names %v (want 6)", got, want)
	}
}
