package store

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
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

// TestRebuildPTRSet: the PTR address set of a rebuild's snapshot is the
// set of its PTR names, read back (IPv4, IPv6, 4in6 and zoned addresses, an
// address two Services share, endpoints and ClusterIPs).
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
	for it := snap.ptrs.idx.of(snap).Iterator(); !it.Done(); {
		a, _, _ := it.Next()
		got = append(got, a)
	}
	if len(want) != 6 || !slices.Equal(got, want) {
		t.Errorf("rebuild's PTR set %v, the snapshot's PTR names %v (want 6)", got, want)
	}
}

// TestPTRSetLazy: a Snapshot's PTR set, made when HasPTRIn first asks,
// matches its PTR names whichever Snapshot was asked before (newer, older,
// or none the change log still reaches).
func TestPTRSetLazy(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}) }
	svc := func(i int) Service {
		return Service{Namespace: "a", Name: fmt.Sprintf("s%d", i), Type: ClusterIP, ClusterIPs: []netip.Addr{ip(i)}}
	}
	st.SetService(svc(1))
	s0 := st.Publish() // a rebuild: its set is made with it
	st.SetService(svc(2))
	s1 := st.Publish()
	st.DeleteService("a", "s1")
	s2 := st.Publish()
	has := func(s *Snapshot, i int) bool { return s.HasPTRIn(netip.PrefixFrom(ip(i), 32)) }
	check := func(what string, s *Snapshot, want1, want2 bool) {
		t.Helper()
		if got1, got2 := has(s, 1), has(s, 2); got1 != want1 || got2 != want2 {
			t.Errorf("%s: PTR of s1 %v, s2 %v; want %v, %v", what, got1, got2, want1, want2)
		}
	}
	check("newest, from the rebuild forward", s2, false, true)
	check("older than the newest made", s1, true, true)
	check("the rebuild's own", s0, true, false)
	if !s2.HasPTRIn(netip.MustParsePrefix("10.96.0.0/16")) || s2.HasPTRIn(netip.MustParsePrefix("10.97.0.0/16")) {
		t.Errorf("prefix lookups wrong")
	}
	// More publishes than the log keeps: the set is built from the names.
	for i := range maxLogEntries + 1 {
		st.SetService(svc(3 + i%2))
		st.Publish()
	}
	st.DeleteService("a", "s2")
	last := st.Publish()
	if last.ChangedSince(s2, func(string) {}) {
		t.Fatalf("the log still reaches the old Snapshot: the test does not test the full build")
	}
	check("past the log", last, false, false)
	if !has(last, 3) || !has(last, 4) {
		t.Errorf("past the log: PTRs of s3, s4 missing")
	}
}

// TestPTRSetConcurrent: readers asking HasPTRIn of whatever Snapshot is
// current while Services come and go get each Snapshot's own answer (run
// it with -race).
func TestPTRSetConcurrent(t *testing.T) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}) }
	st.Publish()
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan string, 4)
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				s := st.Snapshot()
				for i := range 8 {
					n, ok := s.Lookup(ReverseName(ip(i)))
					want := ok && len(n.PTR()) > 0
					if got := s.HasPTRIn(netip.PrefixFrom(ip(i), 32)); got != want {
						errs <- fmt.Sprintf("snapshot %d: HasPTRIn(%s) = %v, its names say %v", s.seq, ip(i), got, want)
						return
					}
				}
			}
		})
	}
	for i := range 400 {
		name := fmt.Sprintf("s%d", i%8)
		if i%3 == 0 {
			st.DeleteService("a", name)
		} else {
			st.SetService(Service{Namespace: "a", Name: name, Type: ClusterIP, ClusterIPs: []netip.Addr{ip(i % 8)}})
		}
		st.Publish()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestMergeNodes: the node of a name many units share holds what adding
// every unit's records one by one to one node makes: addresses and PTR
// targets once each and sorted, SRV records and TXT strings in order, the
// first CNAME; no input node changes.
func TestMergeNodes(t *testing.T) {
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for _, k := range []int{2, 3, 40, 1000} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			var nodes, copies []*Node
			want := &Node{TTL: 5}
			for i := range k {
				n := &Node{TTL: 5}
				for _, add := range []func(*Node){
					func(n *Node) { addAddr(n, addr(k-i)) },
					func(n *Node) { addAddr(n, addr(i%7)) }, // shared by several
					func(n *Node) { addAddr(n, netip.MustParseAddr(fmt.Sprintf("fd00::%x", i%5+1))) },
					func(n *Node) { addPTR(n, fmt.Sprintf("p%d.", (k-i)%11)) },
					func(n *Node) { addSRV(n, SRV{Port: uint16(i), Target: "t."}) },
				} {
					add(n)
					add(want)
				}
				if i%3 == 1 {
					addTXT(n, fmt.Sprint("txt", i))
					addTXT(want, fmt.Sprint("txt", i))
				}
				if i == 1 {
					setCNAME(n, "c.")
					setCNAME(want, "c.")
				}
				sortRecords(n)
				nodes, copies = append(nodes, n), append(copies, cloneNode(n))
			}
			sortRecords(want)
			if got := mergeNodes(nodes); !equalNode(got, want) {
				t.Errorf("merged:\n%+v\nwant:\n%+v", got, want)
			}
			for i := range nodes {
				if !equalNode(nodes[i], copies[i]) {
					t.Fatalf("input node %d changed", i)
				}
			}
		})
	}
}
