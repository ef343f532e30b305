package store

import (
	"net/netip"
	"testing"
)

// TestRelistTouchesNothing: a relist after an API server restart sets
// every object again; a copy of what the store holds touches no unit, so
// the next Publish applies nothing and rebuilds nothing (no second copy
// of the index); a changed object still touches its unit.
func TestRelistTouchesNothing(t *testing.T) {
	s, err := New(Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified})
	if err != nil {
		t.Fatal(err)
	}
	http := []Port{{Name: "http", Protocol: "tcp", Port: 80}}
	objects := func() (Service, EndpointSlice, Pod) {
		return Service{Namespace: "ns", Name: "db", Type: Headless, Ports: http},
			EndpointSlice{Namespace: "ns", Name: "db-1", Service: "db", Ports: http, Endpoints: []Endpoint{
				{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.1")}, Hostname: "db-0", Ready: true, NodeName: "n1", TopologyZone: "za"}}},
			Pod{Namespace: "ns", Name: "db-0", IPs: []netip.Addr{netip.MustParseAddr("10.1.0.1")}, NodeName: "n1"}
	}
	set := func() {
		svc, sl, pod := objects()
		s.SetNamespace(Namespace{Name: "ns"})
		s.SetService(svc)
		s.SetEndpointSlice(sl)
		s.SetPod(pod)
	}
	set()
	first := s.Publish()
	set()
	if n := len(s.olds); n != 0 {
		t.Errorf("a relist of the same objects touched %d units", n)
	}
	if snap := s.Publish(); snap.seq != first.seq+1 || s.wide != 0 || s.lost != 0 {
		t.Errorf("publish after the relist: seq %d (first %d), wide rebuilds %d, lost %d", snap.seq, first.seq, s.wide, s.lost)
	}
	if _, ok := s.Snapshot().Lookup("db-0.db.ns.svc.cluster.local."); !ok {
		t.Error("the endpoint's name went")
	}
	for _, change := range []func(){
		func() { _, sl, _ := objects(); sl.Endpoints[0].Ready = false; s.SetEndpointSlice(sl) },
		func() { svc, _, _ := objects(); svc.Ports = nil; s.SetService(svc) },
		func() { _, _, pod := objects(); pod.NodeName = "n2"; s.SetPod(pod) },
	} {
		change()
		if len(s.olds) != 1 {
			t.Errorf("a change touched %d units, want 1", len(s.olds))
		}
		s.Publish()
	}
}
