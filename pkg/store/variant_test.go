package store

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// topoEndpoint is an endpoint of the variant tests' headless Service.
type topoEndpoint struct {
	ip, host, zone, node string
	ready                bool
}

// topoEndpoints are two topology zones of ready endpoints, a not-ready
// one and one with no topology.
var topoEndpoints = []topoEndpoint{
	{"10.0.0.1", "web-0", "za", "a1", true},
	{"10.0.0.2", "web-1", "za", "a2", true},
	{"10.0.0.3", "web-2", "zb", "b1", true},
	{"10.0.0.4", "web-3", "zb", "b2", false},
	{"fd00::5", "web-4", "", "", true},
}

// topoStore publishes the headless Service web.ns with td and the
// topoEndpoints, in two slices.
func topoStore(t *testing.T, td string, notReady bool) *Snapshot {
	t.Helper()
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	ports := []Port{{Name: "http", Protocol: "tcp", Port: 80}}
	st.SetService(Service{Namespace: "ns", Name: "web", Type: Headless, Ports: ports,
		PublishNotReadyAddresses: notReady, TrafficDistribution: td})
	for i, half := range [][]topoEndpoint{topoEndpoints[:2], topoEndpoints[2:]} {
		sl := EndpointSlice{Namespace: "ns", Name: fmt.Sprintf("web-%d", i), Service: "web", Ports: ports}
		for _, e := range half {
			sl.Endpoints = append(sl.Endpoints, Endpoint{Addresses: addrs(e.ip), Hostname: e.host,
				Ready: e.ready, TopologyZone: e.zone, NodeName: e.node})
		}
		st.SetEndpointSlice(sl)
	}
	return st.Publish()
}

// TestVariantsAgreeWithPrefer answers every client from the store's
// variants and checks that it gets the endpoints pkg/topology's Prefer
// picks: the name's addresses, its SRV records and the named port's.
func TestVariantsAgreeWithPrefer(t *testing.T) {
	const base = "web.ns.svc.cluster.local."
	const named = "_http._tcp." + base
	clients := []topology.Client{{}, {Zone: "za", Node: "a1"}, {Zone: "za", Node: "a9"}, {Zone: "za"},
		{Zone: "zb", Node: "b2"}, {Zone: "zb", Node: "b1"}, {Zone: "zc", Node: "c1"}, {Node: "b1"}, {Node: "a2"}}
	for _, td := range []string{"", topology.PreferSameZone, topology.PreferClose, topology.PreferSameNode, "PreferElsewhere"} {
		for _, notReady := range []bool{false, true} {
			snap := topoStore(t, td, notReady)
			// The served endpoints are Prefer's input.
			var served []topoEndpoint
			var eps []topology.Endpoint
			for _, e := range topoEndpoints {
				if e.ready || notReady {
					served = append(served, e)
					eps = append(eps, topology.Endpoint{Zone: e.zone, Node: e.node, Ready: e.ready})
				}
			}
			for _, c := range clients {
				t.Run(fmt.Sprintf("%s/notready=%v/%s@%s", td, notReady, c.Node, c.Zone), func(t *testing.T) {
					var wantAddrs []netip.Addr
					var wantTargets []string
					for _, i := range topology.Prefer(td, c, eps) {
						wantAddrs = append(wantAddrs, netip.MustParseAddr(served[i].ip))
						wantTargets = append(wantTargets, served[i].host+"."+base)
					}
					slices.SortFunc(wantAddrs, netip.Addr.Compare)
					slices.Sort(wantTargets)
					for _, name := range []string{base, named} {
						v := snap.VariantFor(name, c.Zone, c.Node)
						n, ok := snap.LookupVariant(name, v)
						if !ok {
							t.Fatalf("%s variant %q: no node", name, v)
						}
						var targets []string
						for _, s := range n.SRV() {
							targets = append(targets, s.Target)
						}
						slices.Sort(targets)
						if !slices.Equal(targets, wantTargets) {
							t.Errorf("%s variant %q: SRV targets %v, want %v", name, v, targets, wantTargets)
						}
						if name != base {
							continue
						}
						if got := append(n.A(), n.AAAA()...); !slices.Equal(got, wantAddrs) {
							t.Errorf("%s variant %q: addresses %v, want %v", name, v, got, wantAddrs)
						}
					}
				})
			}
		}
	}
}

// TestVariantsBounded checks which variants a Service has: none without a
// traffic distribution, topology zones for PreferSameZone, zones and
// nodes for PreferSameNode, each holding only its ready endpoints; the
// endpoint names have none.
func TestVariantsBounded(t *testing.T) {
	const base = "web.ns.svc.cluster.local."
	tests := []struct {
		td   string
		want []string // variant keys of base, sorted
	}{
		{"", nil},
		{"PreferElsewhere", nil},
		{topology.PreferSameZone, []string{"\x00Zza", "\x00Zzb"}},
		{topology.PreferClose, []string{"\x00Zza", "\x00Zzb"}},
		{topology.PreferSameNode, []string{"\x00Na1", "\x00Na2", "\x00Nb1", "\x00Zza", "\x00Zzb"}},
	}
	for _, tt := range tests {
		t.Run(tt.td, func(t *testing.T) {
			snap := topoStore(t, tt.td, true)
			var got []string
			perEndpoint := map[string]int{}
			snap.names.All(func(name string, n *Node) {
				if !isVariantKey(name) {
					return
				}
				if b := variantBase(name); b == base && name != base+markVariants {
					got = append(got, name[len(base):])
					for _, a := range append(n.A(), n.AAAA()...) {
						perEndpoint[a.String()]++
					}
				}
			})
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("variants %q, want %q", got, tt.want)
			}
			if has := snap.HasVariants(base); has != (tt.want != nil) {
				t.Errorf("HasVariants = %v, want %v", has, tt.want != nil)
			}
			for a, n := range perEndpoint {
				if a == "10.0.0.4" || n > 2 {
					t.Errorf("endpoint %s in %d variants (not ready: none; else one zone, one node)", a, n)
				}
			}
			if snap.HasVariants("web-0." + base) {
				t.Error("an endpoint name has variants")
			}
			if got := snap.VariantFor("web-2."+base, "za", "a1"); got != "" {
				t.Errorf("VariantFor(endpoint name) = %q, want none", got)
			}
			var names []string
			snap.Names(func(name string, _ *Node) { names = append(names, name) })
			if slices.ContainsFunc(names, isVariantKey) {
				t.Error("Names lists a variant key")
			}
		})
	}
}

// TestTopologyZoneVariant looks up a topology zone's variant as CoreDNS's
// zone-scoped names do: case-folded, and absent for a zone with no ready
// endpoint.
func TestTopologyZoneVariant(t *testing.T) {
	const base = "web.ns.svc.cluster.local."
	snap := topoStore(t, topology.PreferSameZone, false)
	for _, tt := range []struct {
		zone string
		want []netip.Addr
		ok   bool
	}{
		{"za", addrs("10.0.0.1", "10.0.0.2"), true},
		{"ZA", addrs("10.0.0.1", "10.0.0.2"), true},
		{"zb", addrs("10.0.0.3"), true},
		{"zc", nil, false},
	} {
		n, ok := snap.LookupVariant(base, TopologyZoneVariant(tt.zone))
		if ok != tt.ok {
			t.Fatalf("zone %s: found %v, want %v", tt.zone, ok, tt.ok)
		}
		if ok && !slices.Equal(n.A(), tt.want) {
			t.Errorf("zone %s: %v, want %v", tt.zone, n.A(), tt.want)
		}
	}
}

// TestVariantsFollowChanges drains a topology zone and brings it back:
// its variant goes and comes, and ChangedSince reports the name.
func TestVariantsFollowChanges(t *testing.T) {
	const base = "web.ns.svc.cluster.local."
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	st.SetService(Service{Namespace: "ns", Name: "web", Type: Headless, TrafficDistribution: topology.PreferSameZone})
	slice := func(zoneBReady bool) EndpointSlice {
		return EndpointSlice{Namespace: "ns", Name: "web-x", Service: "web", Endpoints: []Endpoint{
			{Addresses: addrs("10.0.0.1"), Ready: true, TopologyZone: "za"},
			{Addresses: addrs("10.0.0.3"), Ready: zoneBReady, TopologyZone: "zb"},
		}}
	}
	steps := []struct {
		zoneBReady bool
		want       []netip.Addr // a zb client's answer
	}{
		{true, addrs("10.0.0.3")},
		{false, addrs("10.0.0.1")}, // drained: every served endpoint
		{true, addrs("10.0.0.3")},
	}
	var prev *Snapshot
	for i, s := range steps {
		st.SetEndpointSlice(slice(s.zoneBReady))
		snap := st.Publish()
		n, _ := snap.LookupVariant(base, snap.VariantFor(base, "zb", ""))
		if got := n.A(); !slices.Equal(got, s.want) {
			t.Errorf("step %d: zb client gets %v, want %v", i, got, s.want)
		}
		if prev != nil {
			reported := false
			snap.ChangedSince(prev, func(name string) { reported = reported || name == base })
			if !reported {
				t.Errorf("step %d: ChangedSince did not report %s", i, base)
			}
		}
		prev = snap
	}
}
