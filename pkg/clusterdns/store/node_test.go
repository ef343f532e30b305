package store

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNodeRecords adds records of every kind in every order to a draft,
// packs it on the heap and in a rebuild's chunk, and reads each kind back
// unmixed; a node unpacked and changed leaves the packed one alone.
func TestNodeRecords(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	b1, b2 := netip.MustParseAddr("fd00::2"), netip.MustParseAddr("::ffff:10.0.0.3")
	long := strings.Repeat("l", 200) + "." // a length of two uvarint bytes
	adds := map[string]func(d *draft){
		"aaaa":  func(d *draft) { addAddr(d, b1) },
		"a":     func(d *draft) { addAddr(d, a1); addAddr(d, a2); addAddr(d, a1) },
		"v4map": func(d *draft) { addAddr(d, b2) },
		"ptr":   func(d *draft) { addPTR(d, "z."); addPTR(d, long); addPTR(d, "z.") },
		"txt":   func(d *draft) { addTXT(d, "t1", "", "t2") },
		"cname": func(d *draft) { setCNAME(d, "old."); setCNAME(d, "c.") },
		"srv": func(d *draft) {
			addSRV(d, SRV{Priority: 1, Weight: 2, Port: 1, Target: "s."})
			takeSRV(d, []SRV{{Port: 65535, Weight: 100, Target: long}})
		},
	}
	orders := [][]string{
		{"aaaa", "a", "v4map", "ptr", "txt", "cname", "srv"},
		{"cname", "txt", "srv", "ptr", "a", "aaaa", "v4map"},
		{"txt", "ptr", "v4map", "srv", "aaaa", "cname", "a"},
	}
	packs := map[string]func(d *draft) *Node{
		"heap":  (*draft).pack,
		"chunk": func(d *draft) *Node { return new(rebuildArena).pack(d) },
	}
	for where, pack := range packs {
		for _, order := range orders {
			d := &draft{ttl: 7}
			for _, k := range order {
				adds[k](d)
			}
			sortRecords(d)
			n := pack(d)
			check := func(what string) {
				t.Helper()
				want := map[string]bool{
					"A":     slices.Equal(n.A(), []netip.Addr{a2, a1, b2.Unmap()}) && n.NumA() == 3 && n.AAt(2) == b2.Unmap(),
					"AAAA":  slices.Equal(n.AAAA(), []netip.Addr{b1}) && n.NumAAAA() == 1 && n.AAAAAt(0) == b1,
					"PTR":   slices.Equal(n.PTR(), []string{long, "z."}),
					"TXT":   slices.Equal(n.TXT(), []string{"t1", "", "t2"}),
					"CNAME": n.CNAME() == "c.",
					"SRV":   slices.Equal(n.SRV(), []SRV{{Priority: 1, Weight: 2, Port: 1, Target: "s."}, {Port: 65535, Weight: 100, Target: long}}),
					"TTL":   n.TTL == 7,
				}
				for k, ok := range want {
					if !ok {
						t.Errorf("%s, order %v, %s: %s wrong: A %v AAAA %v PTR %v TXT %v CNAME %q SRV %v",
							where, order, what, k, n.A(), n.AAAA(), n.PTR(), n.TXT(), n.CNAME(), n.SRV())
					}
				}
			}
			check("packed")
			var c draft
			n.unpack(&c)
			if again := c.pack(); !equalNode(again, n) {
				t.Errorf("%s, order %v: unpacked and packed again differs", where, order)
			}
			addAddr(&c, netip.MustParseAddr("10.9.9.9"))
			addPTR(&c, "x.")
			addSRV(&c, SRV{Port: 3})
			setCNAME(&c, "d.")
			if equalNode(c.pack(), n) {
				t.Errorf("%s, order %v: the changed copy equals its source", where, order)
			}
			check("after the copy changed")
		}
	}
	for _, n := range []*Node{emptyNode(5), new(Node)} {
		if len(n.A())+len(n.AAAA())+len(n.PTR())+len(n.TXT())+len(n.SRV()) != 0 || n.CNAME() != "" || n.NumA()+n.NumAAAA() != 0 {
			t.Errorf("an empty node has records")
		}
	}
}

// TestNodeLarge packs a node of more records than a list of a pooled
// draft keeps, with each kind, and reads them back.
func TestNodeLarge(t *testing.T) {
	var d draft
	var want4, want6 []netip.Addr
	var wantSRV []SRV
	for i := range 70000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		b := netip.AddrFrom16([16]byte{0xfd, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)})
		want4, want6 = append(want4, a), append(want6, b)
		wantSRV = append(wantSRV, SRV{Port: uint16(i), Target: fmt.Sprint(i, ".")})
	}
	addAddrs(&d, append(slices.Clone(want6), want4...))
	takeSRV(&d, wantSRV)
	n := d.pack()
	if !slices.Equal(n.A(), want4) || !slices.Equal(n.AAAA(), want6) || !slices.Equal(n.SRV(), wantSRV) {
		t.Errorf("a node of %d A, %d AAAA and %d SRV records read back wrong", n.NumA(), n.NumAAAA(), len(n.SRV()))
	}
}

// TestDraftPool: a pooled draft comes back empty, and the pool keeps
// neither long lists nor more than poolKeep drafts.
func TestDraftPool(t *testing.T) {
	var p draftPool
	d := p.get(5)
	addAddr(d, netip.MustParseAddr("10.0.0.1"))
	addPTR(d, "p.")
	setCNAME(d, "c.")
	addTXT(d, "t")
	addSRV(d, SRV{Target: "s."})
	p.put(d)
	if got := p.get(9); got != d || got.ttl != 9 || len(got.addrs)+len(got.ptrs)+len(got.txts)+len(got.srv) != 0 || got.cname != "" || got.nA != 0 {
		t.Errorf("a pooled draft came back as %+v", got)
	}
	big := &draft{addrs: make([]netip.Addr, 0, draftKeep+1)}
	p.put(big)
	if len(p.free) != 0 {
		t.Error("the pool kept a draft of a long list")
	}
	for range poolKeep + 10 {
		p.put(&draft{})
	}
	if len(p.free) != poolKeep {
		t.Errorf("the pool keeps %d drafts, want %d", len(p.free), poolKeep)
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
			want := &draft{ttl: 5}
			for i := range k {
				d := &draft{ttl: 5}
				for _, add := range []func(*draft){
					func(d *draft) { addAddr(d, addr(k-i)) },
					func(d *draft) { addAddr(d, addr(i%7)) }, // shared by several
					func(d *draft) { addAddr(d, netip.MustParseAddr(fmt.Sprintf("fd00::%x", i%5+1))) },
					func(d *draft) { addPTR(d, fmt.Sprintf("p%d.", (k-i)%11)) },
					func(d *draft) { addSRV(d, SRV{Port: uint16(i), Target: "t."}) },
				} {
					add(d)
					add(want)
				}
				if i%3 == 1 {
					addTXT(d, fmt.Sprint("txt", i))
					addTXT(want, fmt.Sprint("txt", i))
				}
				if i == 1 {
					setCNAME(d, "c.")
					setCNAME(want, "c.")
				}
				sortRecords(d)
				nodes, copies = append(nodes, d.pack()), append(copies, d.pack())
			}
			sortRecords(want)
			if got, w := mergeNodes(nodes), want.pack(); !equalNode(got, w) {
				t.Errorf("merged:\n%+v\nwant:\n%+v", got, w)
			}
			for i := range nodes {
				if !equalNode(nodes[i], copies[i]) {
					t.Fatalf("input node %d changed", i)
				}
			}
		})
	}
}
