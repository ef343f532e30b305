package store

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestPackedAddrs: a pod's addresses come back from their packed form as
// they were, a zone and a v4-in-v6 form included, and two lists pack
// equal only when they are.
func TestPackedAddrs(t *testing.T) {
	long := netip.MustParseAddr("fe80::1").WithZone(strings.Repeat("z", 200)) // a length over one byte
	lists := [][]netip.Addr{
		nil,
		{netip.MustParseAddr("10.1.2.3")},
		{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::3")},
		{netip.MustParseAddr("fd00::3"), netip.MustParseAddr("10.1.2.3")},
		{netip.MustParseAddr("::ffff:10.1.2.3")},
		{netip.MustParseAddr("fe80::1%eth0"), long},
		{{}},
	}
	for i, ips := range lists {
		p := packAddrs(ips)
		if got := p.addrs(); !slices.Equal(got, ips) {
			t.Errorf("%v packed and unpacked: %v", ips, got)
		}
		for j, other := range lists {
			if (packAddrs(other) == p) != (i == j) {
				t.Errorf("%v and %v: packed equal %v", ips, other, i != j)
			}
		}
	}
	if intern("") != (interned{}) || intern("a").String() != "a" || (interned{}).String() != "" || intern("a") != intern(strings.Clone("a")) {
		t.Error("intern: the zero value is not \"\", or two equal names differ")
	}
}

// TestSliceRecord: an EndpointSlice comes back from its record as it was
// set, and a record equals only a slice that differs in nothing, the
// split of the addresses between the endpoints included.
func TestSliceRecord(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("10.0.0.3")
	base := EndpointSlice{Namespace: "ns", Name: "web-1", Service: "web", Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}},
		Endpoints: []Endpoint{
			{Addresses: []netip.Addr{a, b}, Hostname: "h0", Ready: true, NodeName: "node-1", TopologyZone: "z1"},
			{Addresses: nil, PodName: "p1"},
			{Addresses: []netip.Addr{c}, Ready: true, NodeName: "node-2"},
		}}
	k := nsName{"ns", "web-1"}
	edits := map[string]func(*EndpointSlice){
		"service":         func(v *EndpointSlice) { v.Service = "api" },
		"ports":           func(v *EndpointSlice) { v.Ports = nil },
		"hostname":        func(v *EndpointSlice) { v.Endpoints[0].Hostname = "h9" },
		"pod name":        func(v *EndpointSlice) { v.Endpoints[1].PodName = "" },
		"ready":           func(v *EndpointSlice) { v.Endpoints[2].Ready = false },
		"node":            func(v *EndpointSlice) { v.Endpoints[2].NodeName = "node-1" },
		"zone":            func(v *EndpointSlice) { v.Endpoints[0].TopologyZone = "" },
		"an address":      func(v *EndpointSlice) { v.Endpoints[2].Addresses = []netip.Addr{a} },
		"an address more": func(v *EndpointSlice) { v.Endpoints[1].Addresses = []netip.Addr{c} },
		"the split": func(v *EndpointSlice) {
			v.Endpoints[0].Addresses, v.Endpoints[1].Addresses = []netip.Addr{a}, []netip.Addr{b}
		},
		"an endpoint fewer": func(v *EndpointSlice) { v.Endpoints = v.Endpoints[:2] },
	}
	clone := func(v EndpointSlice) EndpointSlice {
		v.Endpoints = slices.Clone(v.Endpoints)
		return v
	}
	for _, v := range []EndpointSlice{base, {Namespace: "ns", Name: "web-1", Service: "web"}} {
		r := newSliceRecord(&v)
		if got := r.slice(k); !reflect.DeepEqual(got, v) {
			t.Errorf("%+v: the record gives back %+v", v, got)
		}
		if !r.equal(&v) {
			t.Errorf("%+v: not equal to its own record", v)
		}
	}
	r := newSliceRecord(&base)
	for name, edit := range edits {
		v := clone(base)
		edit(&v)
		if r.equal(&v) {
			t.Errorf("%s changed: still equal to the record", name)
		}
	}
}
