package clusterdns

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// TestClustersetTopology: an import with a trafficDistribution answers
// each client the ready imported endpoints of its topology zone, else
// all, the client placed as for the cluster zone (node-local's option,
// else its pod's node in the cluster's records).
func TestClustersetTopology(t *testing.T) {
	cs, err := store.New(store.Options{Zone: "clusterset.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	cs.SetNamespace(store.Namespace{Name: "ns"})
	cs.SetService(store.Service{Namespace: "ns", Name: "kafka", Type: store.Headless, TrafficDistribution: topology.PreferSameZone})
	cs.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "kafka-east", Service: "kafka", Endpoints: []store.Endpoint{
		{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.1")}, Hostname: "k-0.east", Ready: true, TopologyZone: "za"}}})
	cs.SetEndpointSlice(store.EndpointSlice{Namespace: "ns", Name: "kafka-west", Service: "kafka", Endpoints: []store.Endpoint{
		{Addresses: []netip.Addr{netip.MustParseAddr("10.2.0.1")}, Hostname: "k-0.west", Ready: true, TopologyZone: "zb"}}})
	cs.Publish()
	h := NewHandler("cluster.local", snapRecords{topoSnapshot(t)}, WithReplyCache(1<<20), WithTopology(topology.DefaultOptionCode),
		WithClusterset(cs))
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 4000}      // on n1, za
	stranger := &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 4000} // no pod
	const kafka = "kafka.ns.svc.clusterset.local."
	for _, tt := range []struct {
		desc   string
		src    net.Addr
		name   string
		option topology.Client
		want   []string
	}{
		{"pod in za", pod, kafka, topology.Client{}, []string{"10.1.0.1"}},
		{"stranger", stranger, kafka, topology.Client{}, []string{"10.1.0.1", "10.2.0.1"}},
		{"option zb", stranger, kafka, topology.Client{Zone: "zb"}, []string{"10.2.0.1"}},
		{"option zc, none there", pod, kafka, topology.Client{Zone: "zc"}, []string{"10.1.0.1", "10.2.0.1"}},
		{"pod in za again", pod, kafka, topology.Client{}, []string{"10.1.0.1"}},
		{"an endpoint's own name", stranger, "k-0.west.kafka.ns.svc.clusterset.local.", topology.Client{Zone: "za"}, []string{"10.2.0.1"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			if got, _ := serveA(t, h, tt.src, tt.name, tt.option); !slices.Equal(got, tt.want) {
				t.Errorf("%s from %v = %v, want %v", tt.name, tt.src, got, tt.want)
			}
		})
	}
}
