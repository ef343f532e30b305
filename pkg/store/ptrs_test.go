package store

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

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
	for it := snap.ptrSet().Iterator(); !it.Done(); {
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
