package clusterdns_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/store"
)

// externalObjects are Services with external addresses: spec.externalIPs
// (dual-stack, two ports), a LoadBalancer's ingress IP, a headless one,
// one without ports, and one without external addresses.
const externalObjects = `apiVersion: v1
kind: Namespace
metadata: {name: prod}
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: prod}
spec:
  clusterIP: 10.96.0.20
  externalIPs: [198.51.100.7, "2001:db8::7"]
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: prod}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.21
  ports: [{port: 443, protocol: TCP}]
status:
  loadBalancer:
    ingress: [{ip: 203.0.113.10}, {hostname: lb.example.net}]
---
apiVersion: v1
kind: Service
metadata: {name: hl, namespace: prod}
spec:
  clusterIP: None
  externalIPs: [198.51.100.8]
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: noports, namespace: prod}
spec:
  clusterIP: 10.96.0.22
  externalIPs: [198.51.100.9]
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: prod}
spec:
  clusterIP: 10.96.0.23
  ports: [{port: 80}]
`

// TestExternal: the external zone answers as CoreDNS 1.15's k8s_external
// (its tests and its answers to these objects): addresses at the ttl
// option, SRV too with the Service's name as target, the
// apex's SOA and NS, NXDOMAIN and NODATA with the zone's SOA.
func TestExternal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(externalObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	e := start(t, store.Options{TTL: 5}, dir, clusterdns.WithExternal([]string{"example.org", "Example.NET."}, "dns", 30, false))
	nx, nodata := dns.RcodeNameError, dns.RcodeSuccess
	for _, tc := range []tcase{
		{name: "externalIPs A", qname: "ext.prod.example.org.", qtype: dns.TypeA,
			answer: []string{"ext.prod.example.org. 30 IN A 198.51.100.7"}},
		{name: "externalIPs AAAA", qname: "ext.prod.example.org.", qtype: dns.TypeAAAA,
			answer: []string{"ext.prod.example.org. 30 IN AAAA 2001:db8::7"}},
		{name: "second zone, any case", qname: "EXT.prod.example.net.", qtype: dns.TypeA,
			answer: []string{"EXT.prod.example.net. 30 IN A 198.51.100.7"}},
		{name: "an endpoint label is ignored", qname: "x.ext.prod.example.org.", qtype: dns.TypeA,
			answer: []string{"x.ext.prod.example.org. 30 IN A 198.51.100.7"}},
		{name: "named port SRV", qname: "_http._tcp.ext.prod.example.org.", qtype: dns.TypeSRV,
			answer: []string{"_http._tcp.ext.prod.example.org. 30 IN SRV 0 50 80 ext.prod.example.org."},
			extra:  []string{"ext.prod.example.org. 30 IN A 198.51.100.7", "ext.prod.example.org. 30 IN AAAA 2001:db8::7"}},
		{name: "bare SRV", qname: "ext.prod.example.org.", qtype: dns.TypeSRV,
			answer: []string{"ext.prod.example.org. 30 IN SRV 0 25 80 ext.prod.example.org.", "ext.prod.example.org. 30 IN SRV 0 25 53 ext.prod.example.org."}},
		{name: "port of no name", qname: "_https._tcp.ext.prod.example.org.", qtype: dns.TypeSRV, rcode: nx, soa: true},
		{name: "LoadBalancer ingress A", qname: "lb.prod.example.org.", qtype: dns.TypeA,
			answer: []string{"lb.prod.example.org. 30 IN A 203.0.113.10"}},
		{name: "LoadBalancer AAAA: no data", qname: "lb.prod.example.org.", qtype: dns.TypeAAAA, rcode: nodata, soa: true},
		{name: "headless with externalIPs", qname: "hl.prod.example.org.", qtype: dns.TypeA,
			answer: []string{"hl.prod.example.org. 30 IN A 198.51.100.8"}},
		{name: "TXT: no data", qname: "ext.prod.example.org.", qtype: dns.TypeTXT, rcode: nodata, soa: true},
		{name: "no ports", qname: "noports.prod.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "no external IPs", qname: "plain.prod.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "no Service", qname: "nope.prod.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "namespace", qname: "prod.example.org.", qtype: dns.TypeA, rcode: nodata, soa: true},
		{name: "no namespace", qname: "ext.nope.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "too long", qname: "a.b.c.ext.prod.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "apex A", qname: "example.org.", qtype: dns.TypeA, rcode: nodata, soa: true},
		{name: "apex NS", qname: "example.org.", qtype: dns.TypeNS, answer: []string{"example.org. 30 IN NS ns1.dns.example.org."}},
		{name: "apex label", qname: "dns.example.org.", qtype: dns.TypeA, rcode: nodata, soa: true},
		{name: "name server", qname: "ns1.dns.example.org.", qtype: dns.TypeA, rcode: nodata, soa: true},
		{name: "other apex name", qname: "x.dns.example.org.", qtype: dns.TypeA, rcode: nx, soa: true},
		{name: "the cluster zone as before", qname: "ext.prod.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"ext.prod.svc.cluster.local. 5 IN A 10.96.0.20"}},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				check(t, e, network, 30, tc)
			})
		}
	}
	r := ask(t, "udp", e.addr, "example.org.", dns.TypeSOA, 0)
	soa, ok := r.Answer[0].(*dns.SOA)
	if !ok || !r.Authoritative || soa.Hdr.Name != "example.org." || soa.Ns != "ns1.dns.example.org." ||
		soa.Mbox != "hostmaster.dns.example.org." || soa.Hdr.Ttl != 30 || soa.Minttl != 30 {
		t.Fatalf("apex SOA %v", r)
	}
}

// TestExternalChange: a Service's new external IPs (a LoadBalancer's
// status written after its spec) are answered after the next publish,
// whatever was asked before.
func TestExternalChange(t *testing.T) {
	st, err := store.New(store.Options{Zone: "cluster.local", TTL: 5})
	if err != nil {
		t.Fatal(err)
	}
	svc := store.Service{Namespace: "prod", Name: "lb", Type: store.ClusterIP,
		ClusterIPs: []netip.Addr{mustAddr("10.96.0.21")}, Ports: []store.Port{{Protocol: "tcp", Port: 443}}}
	st.SetService(svc)
	st.Publish()
	e := serve(t, st, clusterdns.WithExternal([]string{"example.org"}, "dns", 5, false))
	for range 2 {
		check(t, e, "udp", 5, tcase{qname: "lb.prod.example.org.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true})
	}
	svc.ExternalIPs = []netip.Addr{mustAddr("203.0.113.10")}
	st.SetService(svc)
	st.Publish()
	check(t, e, "udp", 5, tcase{qname: "lb.prod.example.org.", qtype: dns.TypeA, answer: []string{"lb.prod.example.org. 5 IN A 203.0.113.10"}})
	svc.ExternalIPs = []netip.Addr{mustAddr("203.0.113.11")}
	st.SetService(svc)
	st.Publish()
	check(t, e, "udp", 5, tcase{qname: "lb.prod.example.org.", qtype: dns.TypeA, answer: []string{"lb.prod.example.org. 5 IN A 203.0.113.11"}})
}

// TestExternalFallthrough: with fallthrough, a name of the external zone
// that does not exist is forwarded (CoreDNS's next plugin); one that
// exists, or a namespace's NODATA, is not.
func TestExternalFallthrough(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(externalObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	e, up := withForwarder(t, dir, clusterdns.WithExternal([]string{"example.org"}, "dns", 5, true))
	for _, tc := range []struct {
		tcase
		upstream bool
	}{
		{tcase: tcase{qname: "nope.prod.example.org.", qtype: dns.TypeA, answer: []string{"nope.prod.example.org. 60 IN A 192.0.2.1"}}, upstream: true},
		{tcase: tcase{qname: "lb.prod.example.org.", qtype: dns.TypeA, answer: []string{"lb.prod.example.org. 5 IN A 203.0.113.10"}}},
		{tcase: tcase{qname: "prod.example.org.", qtype: dns.TypeA, soa: true}},
	} {
		t.Run(tc.qname, func(t *testing.T) {
			before := up.Count()
			check(t, e, "udp", 5, tc.tcase)
			if went := up.Count() != before; went != tc.upstream {
				t.Errorf("forwarded %v, want %v", went, tc.upstream)
			}
		})
	}
}
