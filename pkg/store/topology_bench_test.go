package store

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

// topologyPods are n pods spread over nodes nodes in zones topology
// zones (node i in zone i mod zones), one IPv4 address each. With place
// false the pods have no node and the nodes are left out, so the store
// keeps no topology for them.
func topologyPods(n, nodes, zones int, place bool) Objects {
	names := make([]string, nodes)
	var o Objects
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d.example.internal", i)
		if place {
			o.Nodes = append(o.Nodes, NodeTopology{Name: names[i], TopologyZone: fmt.Sprintf("zone-%c", 'a'+i%zones)})
		}
	}
	o.Pods = make([]Pod, n)
	for i := range o.Pods {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		p := Pod{Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("pod-%06d", i), IPs: []netip.Addr{ip}}
		if place {
			p.NodeName = names[i%nodes] // shared, as kubefeed interns them
		}
		o.Pods[i] = p
	}
	return o
}

// BenchmarkTopologyHeap is the memory of placing clients by source
// address at 100k pods on 1,000 nodes in 3 topology zones (pods
// verified). topology-B/pod is the live heap a store with the pods'
// nodes and the Nodes holds beyond the same store without them: the
// pod-IP claims, the Snapshot's pod-IP index and the node map. store-B/pod
// is the whole store with its pod records, for scale.
//
//	go test -run '^$' -bench BenchmarkTopologyHeap -benchtime 1x ./pkg/store/
func BenchmarkTopologyHeap(b *testing.B) {
	const pods, nodes, zones = 100000, 1000, 3
	// heapOf is the live heap a published store of the pods adds, with
	// what it keeps of the input (names, addresses) and not the rest.
	heapOf := func(place bool) (uint64, *Snapshot) {
		base := testkit.LiveHeap()
		o := topologyPods(pods, nodes, zones, place)
		st, err := New(Options{Zone: "cluster.local", TTL: 5, Pods: PodsVerified})
		if err != nil {
			b.Fatal(err)
		}
		st.Replace(o)
		snap := st.Publish()
		o.Pods, o.Nodes = nil, nil
		used := testkit.LiveHeap() - base
		runtime.KeepAlive(st)
		return used, snap
	}
	for b.Loop() {
		bare, _ := heapOf(false)
		placed, snap := heapOf(true)
		if z, n := snap.ClientTopology(netip.AddrFrom4([4]byte{10, 0, 0, 4})); z != "zone-b" || n != "node-0004.example.internal" {
			b.Fatalf("ClientTopology(10.0.0.4) = %q, %q", z, n)
		}
		b.ReportMetric(float64(placed-bare)/pods, "topology-B/pod")
		b.ReportMetric(float64(placed)/pods, "store-B/pod")
	}
}
