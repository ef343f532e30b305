package store

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestEndpointChangeCost: moving one endpoint of a headless Service costs
// about the same allocations at 50 endpoints as at 400: the build takes
// the unchanged endpoints' names and nodes from the previous contribution.
// The Snapshot still equals a build from scratch.
func TestEndpointChangeCost(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{50, 400} {
		st, err := New(Options{Zone: "cluster.local", TTL: 5})
		if err != nil {
			t.Fatal(err)
		}
		slice := func(shift int) EndpointSlice {
			eps := make([]Endpoint, n)
			for k := range eps {
				eps[k] = Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(k >> 8), byte(k)})}, Ready: true}
			}
			eps[0].Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 2, byte(shift >> 8), byte(shift)})}
			return EndpointSlice{Namespace: "ns", Name: "hl-1", Service: "hl", Endpoints: eps,
				Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
		}
		st.SetService(Service{Namespace: "ns", Name: "hl", Type: Headless})
		st.SetEndpointSlice(slice(0))
		st.Publish()
		i := 0
		allocs[n] = testing.AllocsPerRun(20, func() {
			i++
			st.SetEndpointSlice(slice(i))
			st.Publish()
		})
		if msg := compareView(st.Publish(), st.oracle(), nil); msg != "" || st.lost != 0 {
			t.Fatalf("%d endpoints: %s (lost %d)", n, msg, st.lost)
		}
	}
	// The slice itself (made in the loop) costs an allocation per endpoint.
	if grow := allocs[400] - allocs[50] - 350; grow > 40 {
		t.Errorf("moving one endpoint allocates %.0f times at 50 endpoints and %.0f at 400 (the slice's own 350 aside: %.0f more)",
			allocs[50], allocs[400], grow)
	}
}

// TestEndpointNodeShared: an endpoint node taken from the previous
// contribution is copied, not changed, when another endpoint adds to its
// name (a second address under the same hostname) or its PTR (a second
// hostname on the same address); the previous Snapshot keeps answering as
// it did.
func TestEndpointNodeShared(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	// Enough other endpoints that the Service's contribution is kept
	// (recentMinNames). The first endpoint's names are new at the second
	// Publish, so the kept nodes of them are the published ones.
	var others []Endpoint
	for k := range 5 {
		others = append(others, Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, 0, byte(k)})}, Ready: true})
	}
	slice := func(eps ...Endpoint) EndpointSlice {
		return EndpointSlice{Namespace: "ns", Name: "web-1", Service: "web", Endpoints: append(eps, others...)}
	}
	for _, tc := range []struct {
		name   string
		second Endpoint
		owner  string // the name whose node gains a record
		want   int    // records there afterwards
	}{
		{"same hostname", Endpoint{Addresses: []netip.Addr{a2}, Hostname: "h", Ready: true}, "h.web.ns.svc.cluster.local.", 2},
		{"same address", Endpoint{Addresses: []netip.Addr{a1}, Hostname: "g", Ready: true}, ReverseName(a1), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := New(Options{Zone: "cluster.local", TTL: 5})
			if err != nil {
				t.Fatal(err)
			}
			first := Endpoint{Addresses: []netip.Addr{a1}, Hostname: "h", Ready: true}
			st.SetService(Service{Namespace: "ns", Name: "web", Type: Headless})
			// The slice's port goes with the next change, so that it is
			// built, not applied as a delta (delta.go), and kept.
			sl := slice()
			sl.Ports = []Port{{Name: "http", Protocol: "tcp", Port: 80}}
			st.SetEndpointSlice(sl)
			st.Publish()
			st.SetEndpointSlice(slice(first)) // publishes the nodes the next build takes
			prev := st.Publish()
			if n, _ := prev.Lookup(tc.owner); n == nil || st.recent.m[unitKey{kind: unitService, nsName: nsName{"ns", "web"}}].names[tc.owner] != n {
				t.Fatalf("the kept contribution does not hold the published node of %s", tc.owner)
			}
			before, _ := prev.Lookup(tc.owner)
			beforeView := st.oracle()
			st.SetEndpointSlice(slice(first, tc.second))
			snap := st.Publish()
			if msg := compareView(snap, st.oracle(), nil); msg != "" || st.lost != 0 {
				t.Fatalf("%s (lost %d)", msg, st.lost)
			}
			if msg := compareView(prev, beforeView, nil); msg != "" {
				t.Fatalf("the previous snapshot changed: %s", msg)
			}
			after, _ := snap.Lookup(tc.owner)
			if got := len(after.A()) + len(after.PTR()); got != tc.want {
				t.Errorf("%s holds %d records, want %d", tc.owner, got, tc.want)
			}
			if got := len(before.A()) + len(before.PTR()); got != 1 {
				t.Errorf("the previous snapshot's %s holds %d records, want 1", tc.owner, got)
			}
		})
	}
}

// TestLargeService: a headless Service of more endpoints than dedupScan,
// with repeats across its slices, an address under two hostnames and a
// port named twice, holds each address, name and SRV record once, as
// counted here without the builder (two port names on one number make
// one record of the Service's own SRV set); a moved endpoint then leaves the
// Snapshot equal to a build from scratch.
func TestLargeService(t *testing.T) {
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }
	ports := []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "grpc", Protocol: "tcp", Port: 81},
		{Name: "http", Protocol: "tcp", Port: 80}, {Name: "web", Protocol: "tcp", Port: 80}}
	var sls []EndpointSlice
	addrs := map[netip.Addr]bool{}
	hosts := map[string]bool{} // the endpoint names
	for s := range 3 {
		var eps []Endpoint
		for k := range 50 {
			i := s*40 + k // slices s and s+1 share ten endpoints
			ep := Endpoint{Addresses: []netip.Addr{addr(i)}, Ready: i%17 != 0}
			if i%5 == 0 {
				ep.Hostname = fmt.Sprint("h", i)
			}
			eps = append(eps, ep)
			if i%10 == 3 { // the same address under a second hostname
				eps = append(eps, Endpoint{Addresses: []netip.Addr{addr(i)}, Hostname: fmt.Sprint("alias", i), Ready: true})
				hosts[fmt.Sprintf("alias%d.big.ns.svc.cluster.local.", i)] = true
				addrs[addr(i)] = true
			}
			if ep.Ready {
				addrs[addr(i)] = true
				label := strings.ReplaceAll(addr(i).String(), ".", "-")
				if ep.Hostname != "" {
					label = ep.Hostname
				}
				hosts[label+".big.ns.svc.cluster.local."] = true
			}
		}
		sls = append(sls, EndpointSlice{Namespace: "ns", Name: fmt.Sprint("big-", s), Service: "big", Endpoints: eps, Ports: ports})
	}
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(Service{Namespace: "ns", Name: "big", Type: Headless})
	for _, sl := range sls {
		st.SetEndpointSlice(sl)
	}
	snap := st.Publish()
	svc, _ := snap.Lookup("big.ns.svc.cluster.local.")
	want := slices.SortedFunc(maps.Keys(addrs), netip.Addr.Compare)
	if !slices.Equal(svc.A(), want) {
		t.Errorf("the Service's A records: %d, want the %d distinct ready addresses", len(svc.A()), len(want))
	}
	if snap.Counts.Endpoints != len(hosts) {
		t.Errorf("%d endpoints counted, want %d", snap.Counts.Endpoints, len(hosts))
	}
	for _, name := range []string{"_http._tcp.big.ns.svc.cluster.local.", "_grpc._tcp.big.ns.svc.cluster.local.", "_web._tcp.big.ns.svc.cluster.local."} {
		n, _ := snap.Lookup(name)
		targets := map[string]bool{}
		for _, r := range n.SRV() {
			targets[r.Target] = true
			if r.Weight != uint16(max(1, 100/len(hosts))) {
				t.Fatalf("%s: weight %d with %d records", name, r.Weight, len(hosts))
			}
		}
		if len(n.SRV()) != len(hosts) || len(targets) != len(hosts) {
			t.Errorf("%s: %d SRV records to %d targets, want one to each of the %d names", name, len(n.SRV()), len(targets), len(hosts))
		}
	}
	if got := len(svc.SRV()); got != 2*len(hosts) {
		t.Errorf("the Service's SRV records: %d, want %d (two ports to each name)", got, 2*len(hosts))
	}
	sls[1].Endpoints = slices.Clone(sls[1].Endpoints)
	sls[1].Endpoints[7] = Endpoint{Addresses: []netip.Addr{addr(999)}, Ready: true}
	st.SetEndpointSlice(sls[1])
	if msg := compareView(st.Publish(), st.oracle(), nil); msg != "" || st.lost != 0 {
		t.Fatalf("after a move: %s (lost %d)", msg, st.lost)
	}
}

// TestAppendEndpointLabel: the label of an endpoint is its hostname, else
// (with pod names) its pod name, lowercase and at most 63 bytes, else its
// dashed address, for both families.
func TestAppendEndpointLabel(t *testing.T) {
	v4, v6, v6end, mapped := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::1"),
		netip.MustParseAddr("fd00::"), netip.MustParseAddr("::ffff:10.0.0.2")
	for _, tc := range []struct {
		ep       Endpoint
		a        netip.Addr
		podNames bool
		want     string
	}{
		{Endpoint{Hostname: "web-0"}, v4, false, "web-0"},
		{Endpoint{Hostname: "Web-0"}, v4, false, "web-0"},
		{Endpoint{Hostname: "ÄB-x"}, v4, false, "äb-x"},
		{Endpoint{PodName: "Pod-A"}, v4, true, "pod-a"},
		{Endpoint{PodName: "pod-a"}, v4, false, "10-1-2-3"},
		{Endpoint{Hostname: strings.Repeat("a", 64)}, v4, false, "10-1-2-3"},
		{Endpoint{}, v6, false, "fd00--1"},
		{Endpoint{}, v6end, false, "fd00--0"},
		{Endpoint{}, mapped, false, "10-0-0-2"},
	} {
		if got := string(appendEndpointLabel([]byte("x."), tc.ep, tc.a, tc.podNames)); got != "x."+tc.want {
			t.Errorf("%+v %v: appended %q, want %q", tc.ep, tc.a, got, "x."+tc.want)
		}
	}
}

// TestImplicitEndpointNames: an endpoint named by its dashed address is
// not kept in the index, yet answers as a kept name would: under its own
// Service only, in its canonical form only, with every address a name
// holds when a hostname of the Service spells another address; and
// ChangedSince reports it when it goes.
func TestImplicitEndpointNames(t *testing.T) {
	ip := netip.MustParseAddr
	ep := func(a, host string) Endpoint {
		return Endpoint{Addresses: []netip.Addr{ip(a)}, Hostname: host, Ready: true}
	}
	st, err := New(Options{Zone: "cluster.local", TTL: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"web", "db", "odd"} {
		st.SetService(Service{Namespace: "a", Name: svc, Type: ClusterIP, ClusterIPs: []netip.Addr{ip("10.96.0." + fmt.Sprint(len(svc)))}})
	}
	st.SetEndpointSlice(EndpointSlice{Namespace: "a", Name: "web-1", Service: "web", Endpoints: []Endpoint{ep("10.0.0.2", ""), ep("fd00::", "")}})
	// A clusterset endpoint's hostname is two labels, the first its dashed address.
	st.SetEndpointSlice(EndpointSlice{Namespace: "a", Name: "db-1", Service: "db", Endpoints: []Endpoint{ep("10.0.0.3", ""), ep("10.0.0.6", "10-0-0-6.east")}})
	// odd: a hostname that is the dashed form of the other endpoint's address.
	st.SetEndpointSlice(EndpointSlice{Namespace: "a", Name: "odd-1", Service: "odd", Endpoints: []Endpoint{ep("10.0.0.4", "10-0-0-5"), ep("10.0.0.5", "")}})
	snap := st.Publish()
	if _, kept := snap.names.Get("10-0-0-2.web.a.svc.cluster.local."); kept {
		t.Error("the dashed endpoint name is kept in the index")
	}
	for _, c := range []struct {
		name  string
		addrs []netip.Addr // nil: no such name
	}{
		{"10-0-0-2.web.a.svc.cluster.local.", []netip.Addr{ip("10.0.0.2")}},
		{"fd00--0.web.a.svc.cluster.local.", []netip.Addr{ip("fd00::")}},
		{"10-0-0-3.db.a.svc.cluster.local.", []netip.Addr{ip("10.0.0.3")}},
		{"10-0-0-6.east.db.a.svc.cluster.local.", []netip.Addr{ip("10.0.0.6")}},
		{"10-0-0-6.db.a.svc.cluster.local.", nil},
		{"10-0-0-2.db.a.svc.cluster.local.", nil},    // another Service's endpoint
		{"10-0-0-02.web.a.svc.cluster.local.", nil},  // not canonical
		{"fd00--.web.a.svc.cluster.local.", nil},     // not canonical
		{"10-0-0-2.web.b.svc.cluster.local.", nil},   // another namespace
		{"10-0-0-2.x.web.a.svc.cluster.local.", nil}, // below the name
		{"10-0-0-5.odd.a.svc.cluster.local.", []netip.Addr{ip("10.0.0.4"), ip("10.0.0.5")}},
	} {
		n, ok := snap.Lookup(c.name)
		if ok != (c.addrs != nil) {
			t.Errorf("Lookup(%s) found %v, want %v", c.name, ok, c.addrs != nil)
			continue
		}
		if !ok {
			continue
		}
		if got := slices.Concat(n.A(), n.AAAA()); !slices.Equal(got, c.addrs) || n.TTL != 7 {
			t.Errorf("Lookup(%s) = %v TTL %d, want %v TTL 7", c.name, got, n.TTL, c.addrs)
		}
	}
	st.SetEndpointSlice(EndpointSlice{Namespace: "a", Name: "web-1", Service: "web", Endpoints: []Endpoint{ep("fd00::", "")}})
	next := st.Publish()
	if _, ok := next.Lookup("10-0-0-2.web.a.svc.cluster.local."); ok {
		t.Error("the endpoint's name outlives the endpoint")
	}
	reported := false
	next.ChangedSince(snap, func(name string) { reported = reported || name == "10-0-0-2.web.a.svc.cluster.local." })
	if !reported {
		t.Error("ChangedSince does not report the gone endpoint's name")
	}
}
