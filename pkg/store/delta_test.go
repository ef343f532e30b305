package store

import (
	"net/netip"
	"slices"
	"testing"
)

// TestDelta: a change of a Service's endpoints alone is applied as a
// delta, and every other change is built as before; either way the
// Snapshot equals a build from scratch, the previous one answers as it
// did, and ChangedSince reports every name that changed.
func TestDelta(t *testing.T) {
	addr := func(k int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, 0, byte(k)}) }
	ports := []Port{{Name: "http", Protocol: "tcp", Port: 80}}
	slice := func(name string, n int) EndpointSlice {
		eps := make([]Endpoint, n)
		for k := range eps {
			eps[k] = Endpoint{Addresses: []netip.Addr{addr(k + 1)}, Ready: true}
		}
		return EndpointSlice{Namespace: "ns", Name: name, Service: "web", Endpoints: eps, Ports: ports}
	}
	headless := Service{Namespace: "ns", Name: "web", Type: Headless}
	clusterIP := Service{Namespace: "ns", Name: "web", Type: ClusterIP, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.9")}, Ports: ports}
	moved := func(sl EndpointSlice, k int, a netip.Addr) EndpointSlice {
		sl.Endpoints = slices.Clone(sl.Endpoints)
		sl.Endpoints[k].Addresses = []netip.Addr{a}
		return sl
	}
	for _, tc := range []struct {
		name   string
		opts   Options
		svc    Service
		before []EndpointSlice
		change func(st *Store)
		delta  bool
	}{
		{name: "headless, an endpoint moves", svc: headless, before: []EndpointSlice{slice("s1", 5)}, delta: true,
			change: func(st *Store) { st.SetEndpointSlice(moved(slice("s1", 5), 0, addr(99))) }},
		{name: "ClusterIP, an endpoint moves", svc: clusterIP, before: []EndpointSlice{slice("s1", 5)}, delta: true,
			change: func(st *Store) { st.SetEndpointSlice(moved(slice("s1", 5), 2, addr(99))) }},
		{name: "headless, endpoints come, go and turn unready", svc: headless, before: []EndpointSlice{slice("s1", 5)}, delta: true,
			change: func(st *Store) {
				sl := slice("s1", 7)
				sl.Endpoints = slices.Delete(sl.Endpoints, 1, 2)
				sl.Endpoints[3].Ready = false
				st.SetEndpointSlice(sl)
			}},
		{name: "hostnames, an endpoint moves and keeps its name", svc: headless, delta: true,
			before: []EndpointSlice{func() EndpointSlice {
				sl := slice("s1", 3)
				for k := range sl.Endpoints {
					sl.Endpoints[k].Hostname = string(rune('a' + k))
				}
				return sl
			}()},
			change: func(st *Store) {
				sl := st.storedSlice(nsName{"ns", "s1"})
				st.SetEndpointSlice(moved(sl, 1, netip.MustParseAddr("fd00::7")))
			}},
		{name: "pod names, one with a dot", opts: Options{EndpointPodNames: true}, svc: headless,
			before: []EndpointSlice{slice("s1", 3)},
			change: func(st *Store) {
				sl := moved(slice("s1", 3), 0, addr(99))
				sl.Endpoints[0].PodName = "a.b"
				st.SetEndpointSlice(sl)
			}},
		{name: "the Service changes too", svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) {
				st.SetEndpointSlice(moved(slice("s1", 5), 0, addr(99)))
				st.SetService(Service{Namespace: "ns", Name: "web", Type: Headless, PublishNotReadyAddresses: true})
			}},
		{name: "the ports change", svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) {
				sl := moved(slice("s1", 5), 0, addr(99))
				sl.Ports = []Port{{Name: "grpc", Protocol: "tcp", Port: 81}}
				st.SetEndpointSlice(sl)
			}},
		{name: "a second slice", svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) {
				sl := slice("s2", 1)
				sl.Endpoints[0].Addresses = []netip.Addr{addr(99)}
				st.SetEndpointSlice(sl)
			}},
		{name: "a slice stops serving", svc: headless, before: []EndpointSlice{slice("s1", 5), moved(slice("s2", 1), 0, addr(99))},
			change: func(st *Store) {
				sl := moved(slice("s2", 1), 0, addr(99))
				sl.Endpoints[0].Ready = false
				st.SetEndpointSlice(sl)
			}},
		{name: "the last endpoint goes", svc: headless, before: []EndpointSlice{slice("s1", 1)},
			change: func(st *Store) {
				sl := slice("s1", 1)
				sl.Endpoints[0].Ready = false
				st.SetEndpointSlice(sl)
			}},
		{name: "a hostname twice", svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) {
				sl := moved(slice("s1", 5), 0, addr(99))
				sl.Endpoints[0].Hostname, sl.Endpoints[1].Hostname = "h", "h"
				st.SetEndpointSlice(sl)
			}},
		{name: "an address twice", svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) {
				sl := slice("s1", 5)
				sl.Endpoints = append(sl.Endpoints, Endpoint{Addresses: []netip.Addr{addr(1)}, Hostname: "h", Ready: true})
				st.SetEndpointSlice(sl)
			}},
		{name: "an endpoint served by two slices, another moves", svc: headless, delta: true,
			before: []EndpointSlice{slice("s1", 5), slice("s2", 1)},
			change: func(st *Store) { st.SetEndpointSlice(moved(slice("s1", 5), 2, addr(99))) }},
		{name: "a slice lists its port twice", svc: headless, delta: true,
			before: []EndpointSlice{func() EndpointSlice {
				sl := slice("s1", 5)
				sl.Ports = []Port{ports[0], {Name: "HTTP", Protocol: "tcp", Port: 80}}
				return sl
			}()},
			change: func(st *Store) {
				sl := moved(slice("s1", 5), 0, addr(99))
				sl.Ports = []Port{ports[0], {Name: "HTTP", Protocol: "tcp", Port: 80}}
				st.SetEndpointSlice(sl)
			}},
		{name: "two port names on one number", svc: headless, delta: true,
			before: []EndpointSlice{func() EndpointSlice {
				sl := slice("s1", 5)
				sl.Ports = []Port{ports[0], {Name: "web", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 80}}
				return sl
			}()},
			change: func(st *Store) {
				sl := moved(slice("s1", 5), 4, addr(99))
				sl.Ports = []Port{ports[0], {Name: "web", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 80}}
				st.SetEndpointSlice(sl)
			}},
		{name: "an endpoint on the ClusterIP", svc: clusterIP, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) { st.SetEndpointSlice(moved(slice("s1", 5), 0, netip.MustParseAddr("10.96.0.9"))) }},
		{name: "PTR names inside the zone", opts: Options{Zone: "in-addr.arpa"}, svc: headless, before: []EndpointSlice{slice("s1", 5)},
			change: func(st *Store) { st.SetEndpointSlice(moved(slice("s1", 5), 0, addr(99))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts.Zone == "" {
				opts.Zone = "cluster.local"
			}
			opts.TTL = 5
			st, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			st.SetService(tc.svc)
			for _, sl := range tc.before {
				st.SetEndpointSlice(sl)
			}
			prev := st.Publish()
			prevView := st.oracle()
			tc.change(st)
			snap := st.Publish()
			if got := st.deltas == 1; got != tc.delta || st.lost != 0 {
				t.Fatalf("applied as a delta: %v, want %v (lost %d)", got, tc.delta, st.lost)
			}
			want := st.oracle()
			if msg := compareView(snap, want, nil); msg != "" {
				t.Fatal(msg)
			}
			if msg := compareView(prev, prevView, nil); msg != "" {
				t.Fatalf("the previous snapshot changed: %s", msg)
			}
			reported := map[string]bool{}
			if !snap.ChangedSince(prev, func(n string) { reported[n] = true }) {
				t.Fatal("ChangedSince lost the previous snapshot")
			}
			diff := differing(prevView, want)
			if len(diff) == 0 {
				t.Fatal("the change changed no name")
			}
			for _, n := range diff {
				if !reported[n] {
					t.Errorf("%s changed but ChangedSince did not report it", n)
				}
			}
		})
	}
}
