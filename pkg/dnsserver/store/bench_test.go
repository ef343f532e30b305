package store

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkPublish10k measures a full snapshot build at the benchmark size:
// 10,000 ClusterIP Services in 100 namespaces and 100 headless Services with
// 20 endpoints each.
func BenchmarkPublish10k(b *testing.B) {
	st, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		st.SetService(Service{Namespace: fmt.Sprintf("ns-%d", i/100), Name: fmt.Sprintf("svc-%d", i%100), Type: ClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)})},
			Ports:      []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	}
	for j := range 100 {
		ns, name := fmt.Sprintf("ns-%d", j), fmt.Sprintf("hl-%d", j)
		st.SetService(Service{Namespace: ns, Name: name, Type: Headless})
		var eps []Endpoint
		for k := range 20 {
			eps = append(eps, Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, byte(j), byte(k + 1)})}, Ready: true})
		}
		st.SetEndpointSlice(EndpointSlice{Namespace: ns, Name: name + "-1", Service: name, Endpoints: eps,
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		st.Publish()
	}
}
