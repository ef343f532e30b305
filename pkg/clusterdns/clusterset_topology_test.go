package clusterdns

import (
	"net"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/topology"
)

// TestClustersetTopology: an import with a trafficDistribution answers
// each client the ready imported endpoints of its topology zone, else
// those of this cluster, else all; the client placed as for the cluster
// zone (node-local's option, else its pod's node in the cluster's
// records). The records are converted as kubefeed.Clusterset converts
// them.
func TestClustersetTopology(t *testing.T) {
	cs, err := store.New(store.Options{Zone: "clusterset.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	svc, keep, err := kubefeed.ImportV1beta1(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kafka"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, TrafficDistribution: new(string(corev1.ServiceTrafficDistributionPreferSameZone))}})
	if err != nil || !keep {
		t.Fatal(keep, err)
	}
	cs.SetNamespace(store.Namespace{Name: "ns"})
	cs.SetService(svc)
	for _, sl := range []struct{ cluster, zone, addr string }{
		{"east", "za", "10.1.0.1"}, {"east", "zb", "10.1.0.2"}, {"west", "za", "10.2.0.1"}, {"west", "zb", "10.2.0.2"},
	} {
		es, keep, err := kubefeed.ImportedEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kafka-" + sl.addr,
			Labels: map[string]string{mcsv1beta1.LabelServiceName: "kafka", mcsv1beta1.LabelSourceCluster: sl.cluster}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{sl.addr}, Zone: new(sl.zone)}}})
		if err != nil || !keep {
			t.Fatal(keep, err)
		}
		cs.SetEndpointSlice(es)
	}
	cs.Publish()
	local := "east"
	h := NewHandler("cluster.local", snapRecords{topoSnapshot(t)}, WithReplyCache(1<<20), WithTopology(topology.DefaultOptionCode),
		WithClusterset(cs, func() string { return local }))
	pod := &net.UDPAddr{IP: net.ParseIP("10.0.0.9"), Port: 4000}      // on n1, za
	stranger := &net.UDPAddr{IP: net.ParseIP("10.9.9.9"), Port: 4000} // no pod
	const kafka = "kafka.ns.svc.clusterset.local."
	all := []string{"10.1.0.1", "10.1.0.2", "10.2.0.1", "10.2.0.2"}
	for _, tt := range []struct {
		desc   string
		local  string
		src    net.Addr
		name   string
		option topology.Client
		want   []string
	}{
		{"pod in za: its zone, both clusters", "east", pod, kafka, topology.Client{}, []string{"10.1.0.1", "10.2.0.1"}},
		{"option zb", "east", stranger, kafka, topology.Client{Zone: "zb"}, []string{"10.1.0.2", "10.2.0.2"}},
		{"zone zc has none: this cluster", "east", pod, kafka, topology.Client{Zone: "zc"}, []string{"10.1.0.1", "10.1.0.2"}},
		{"unplaced: this cluster", "east", stranger, kafka, topology.Client{}, []string{"10.1.0.1", "10.1.0.2"}},
		{"this cluster has none: all", "north", pod, kafka, topology.Client{Zone: "zc"}, all},
		{"this cluster unknown: all", "", stranger, kafka, topology.Client{}, all},
		{"pod in za again", "east", pod, kafka, topology.Client{}, []string{"10.1.0.1", "10.2.0.1"}},
		{"an endpoint's own name", "east", stranger, "10-2-0-2.west.kafka.ns.svc.clusterset.local.", topology.Client{Zone: "za"}, []string{"10.2.0.2"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			local = tt.local
			if got, _ := serveA(t, h, tt.src, tt.name, tt.option); !slices.Equal(got, tt.want) {
				t.Errorf("%s from %v = %v, want %v", tt.name, tt.src, got, tt.want)
			}
		})
	}
}
