package store

import (
	"net/netip"
	"slices"
	"testing"
)

// TestExternal: a Service's external node holds its external IPs and a
// SRV per port (target _<name>._<protocol>), made again when only the
// external IPs change, gone without external IPs or ports; no query name
// reaches it.
func TestExternal(t *testing.T) {
	s, err := New(Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	svc := Service{Namespace: "prod", Name: "lb", Type: ClusterIP, ClusterIPs: []netip.Addr{a("10.96.0.21")},
		Ports: []Port{{Name: "HTTPS", Protocol: "tcp", Port: 443}, {Protocol: "udp", Port: 53}}}
	for _, tc := range []struct {
		name  string
		ips   []netip.Addr
		ports []Port
		want  []netip.Addr // nil: no node
		srv   []SRV
	}{
		{"none", nil, svc.Ports, nil, nil},
		{"ingress", []netip.Addr{a("203.0.113.10")}, svc.Ports, []netip.Addr{a("203.0.113.10")},
			[]SRV{{Port: 53, Target: "_._udp"}, {Port: 443, Target: "_https._tcp"}}},
		{"changed", []netip.Addr{a("203.0.113.11"), a("2001:db8::1")}, svc.Ports, []netip.Addr{a("203.0.113.11"), a("2001:db8::1")},
			[]SRV{{Port: 53, Target: "_._udp"}, {Port: 443, Target: "_https._tcp"}}},
		{"no ports", []netip.Addr{a("203.0.113.11")}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := svc
			v.ExternalIPs, v.Ports = tc.ips, tc.ports
			s.SetService(v)
			snap := s.Publish()
			n, ok := snap.External("lb", "prod")
			if ok != (tc.want != nil) {
				t.Fatalf("external node %v, want one: %v", ok, tc.want != nil)
			}
			if !ok {
				return
			}
			if got := append(n.A(), n.AAAA()...); !slices.Equal(got, tc.want) {
				t.Errorf("addresses %v, want %v", got, tc.want)
			}
			got := n.SRV()
			slices.SortFunc(got, func(x, y SRV) int { return int(x.Port) - int(y.Port) })
			if !slices.EqualFunc(got, tc.srv, func(x, y SRV) bool { return x.Port == y.Port && x.Target == y.Target }) {
				t.Errorf("SRV %+v, want %+v", got, tc.srv)
			}
			snap.Names(func(name string, _ *Node) {
				if isVariantKey(name) {
					t.Errorf("Names lists the key %q", name)
				}
			})
		})
	}
}

// TestServiceRecordExternalIPs: the packed record keeps the external IPs.
func TestServiceRecordExternalIPs(t *testing.T) {
	v := Service{Namespace: "ns", Name: "s", Type: Headless, TrafficDistribution: "PreferClose",
		ExternalIPs: []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")}}
	got := newSvcRecord(&v).service(v.key())
	if !slices.Equal(got.ExternalIPs, v.ExternalIPs) || got.TrafficDistribution != v.TrafficDistribution {
		t.Fatalf("%+v, want %+v", got, v)
	}
}
